/** Small fetch helpers for end-to-end suites. */
export interface Reply {
  readonly status: number
  readonly body: any
  readonly headers: Headers
}

export const api = (baseUrl: string, token?: string) => {
  const call = async (method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<Reply> => {
    const response = await fetch(`${baseUrl}/api${path}`, {
      method,
      redirect: "manual",
      headers: {
        ...(token === undefined ? {} : { authorization: `Bearer ${token}` }),
        ...(body === undefined ? {} : { "content-type": "application/json" }),
        ...headers
      },
      ...(body === undefined ? {} : { body: typeof body === "string" ? body : JSON.stringify(body) })
    })
    const text = await response.text()
    let parsed: unknown = text
    try {
      parsed = text === "" ? undefined : JSON.parse(text)
    } catch {
      // not JSON: keep the text
    }
    return { status: response.status, body: parsed, headers: response.headers }
  }
  return {
    get: (path: string, headers?: Record<string, string>) => call("GET", path, undefined, headers),
    post: (path: string, body?: unknown, headers?: Record<string, string>) => call("POST", path, body ?? {}, headers),
    patch: (path: string, body: unknown) => call("PATCH", path, body),
    put: (path: string, body: unknown) => call("PUT", path, body),
    delete: (path: string, headers?: Record<string, string>) => call("DELETE", path, undefined, headers),
    raw: call
  }
}

/**
 * A 202's operation (the spec's pending write: the command outlived the request's wait but was taken) followed to its
 * outcome, asked of `urls` in turn (a node that died answers nothing), for at most `withinMs`: the reply with the
 * outcome's status and body, or the 202 itself when the operation stayed pending that long.
 */
export const settleReply = async (reply: Reply, urls: () => ReadonlyArray<string>, token: string, withinMs = 120_000): Promise<Reply> => {
  if (reply.status !== 202 || typeof reply.body?.operation_id !== "string") return reply
  const until = Date.now() + withinMs
  for (let turn = 0; Date.now() < until; turn++) {
    const nodes = urls()
    const operation = await api(nodes[turn % nodes.length]!, token).get(`/operations/${reply.body.operation_id}`).catch(() => undefined)
    if (operation?.status === 200 && operation.body.status !== "pending" && typeof operation.body.http_status === "number") {
      return { ...reply, status: operation.body.http_status, body: operation.body.response }
    }
    await new Promise((resolve) => setTimeout(resolve, 200))
  }
  return reply
}

/** Every error body the API sends has this shape. */
export const isErrorBody = (body: unknown): boolean =>
  typeof body === "object" && body !== null && typeof (body as { error?: unknown }).error === "string" &&
  Object.keys(body).every((k) => ["error", "code", "retryable", "scope", "conflict_paths", "operation_id"].includes(k))
