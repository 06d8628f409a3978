/**
 * A client of the repository event stream (`GET /api/{owner}/{name}/events`) for end-to-end suites:
 * reads server-sent events as text, waits for a frame or the end with a bound, and closes the
 * connection (a disconnect, as far as the server can tell).
 */
import { expect } from "@effect/vitest"

/** Streams not closed yet: `closeAll` ends them (in a suite's afterAll, before its servers stop). */
const opened = new Set<EventStream>()

export const closeAll = async () => {
  // Deleting the current entry while iterating a Set is safe: close() removes it.
  for (const stream of opened) await stream.close()
}

export interface EventStream {
  readonly status: number
  readonly headers: Headers
  /** Everything received so far. */
  readonly text: () => string
  /** Reads until `what` is in the text (fails after `timeoutMs` or when the stream ends first). */
  readonly until: (what: string, timeoutMs?: number) => Promise<void>
  /** Reads until the server ends the stream. */
  readonly ended: (timeoutMs?: number) => Promise<void>
  readonly close: () => Promise<void>
}

/** Opens `GET {baseUrl}/api{path}` (an event stream when it answers 200; otherwise its body is read at once). */
export const openStream = async (baseUrl: string, path: string, token?: string): Promise<EventStream> => {
  const controller = new AbortController()
  const response = await fetch(`${baseUrl}/api${path}`, {
    headers: token === undefined ? {} : { authorization: `Bearer ${token}` },
    signal: controller.signal
  })
  let text = ""
  let done = response.status !== 200
  const reader = response.status === 200 ? response.body!.pipeThrough(new TextDecoderStream()).getReader() : undefined
  if (reader === undefined) text = await response.text()
  const read = async (stop: () => boolean, what: string, timeoutMs: number) => {
    const deadline = Date.now() + timeoutMs
    while (!stop()) {
      if (done) throw new Error(`the stream ended before ${what}; received:\n${text}`)
      const left = deadline - Date.now()
      if (left <= 0) throw new Error(`timed out waiting for ${what}; received:\n${text}`)
      let timer: ReturnType<typeof setTimeout> | undefined
      const timeout = new Promise<"timeout">((resolve) => (timer = setTimeout(() => resolve("timeout"), left)))
      const next = await Promise.race([reader!.read(), timeout])
      clearTimeout(timer)
      if (next === "timeout") continue
      if (next.done) done = true
      else text += next.value
    }
  }
  const stream: EventStream = {
    status: response.status,
    headers: response.headers,
    text: () => text,
    until: (what, timeoutMs = 15_000) => read(() => text.includes(what), JSON.stringify(what), timeoutMs),
    ended: async (timeoutMs = 15_000) => {
      try {
        await read(() => false, "the end", timeoutMs)
      } catch (error) {
        if (!done) throw error
      }
    },
    close: async () => {
      opened.delete(stream)
      controller.abort()
      await reader?.cancel().catch(() => undefined)
    }
  }
  opened.add(stream)
  return stream
}


/** The `event: closed` frame's data; that the stream then ended; and that no branch event came. */
export const expectClosed = async (stream: EventStream, reason: string) => {
  await stream.until("event: closed")
  await stream.ended()
  const data = /^event: closed\ndata: (.*)$/m.exec(stream.text())![1]!
  expect(JSON.parse(data)).toMatchObject({ reason })
  expect(stream.text()).not.toContain("event: branch")
}
