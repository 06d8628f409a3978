/**
 * Server addresses. Credentials are keyed by the normalised form, so
 * `http://HOST:8080/` and `http://host:8080` name the same server.
 */
export const DEFAULT_REMOTE = "http://127.0.0.1:8080"

/** `scheme://host[:port][/path]` without a trailing slash, query or fragment; undefined when not an http(s) URL. */
export const normaliseRemote = (value: string): string | undefined => {
  let url: URL
  try {
    url = new URL(value.trim())
  } catch {
    return undefined
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") return undefined
  if (url.username !== "" || url.password !== "") return undefined
  return `${url.protocol}//${url.host}${url.pathname.replace(/\/+$/, "")}`
}

/** Same server? Both sides normalised; an unparsable address matches nothing. */
export const sameRemote = (a: string, b: string): boolean => {
  const left = normaliseRemote(a)
  return left !== undefined && left === normaliseRemote(b)
}

/** Whether `--remote` or `GROVE_REMOTE` names the server, so no default is needed. */
export const remoteGiven = (flag: string | undefined, env: Readonly<Record<string, string | undefined>>): boolean =>
  flag !== undefined || (env["GROVE_REMOTE"] ?? "") !== ""

/**
 * The server a command addresses: `--remote`, else `GROVE_REMOTE`, else `fallback` (the checkout's
 * server, else the last one logged in to: `defaultRemote`), else the local default.
 */
export const chooseRemote = (
  flag: string | undefined,
  env: Readonly<Record<string, string | undefined>>,
  fallback: string = DEFAULT_REMOTE
): { readonly remote: string } | { readonly error: string } => {
  const fromEnv = env["GROVE_REMOTE"]
  const [raw, origin] = flag !== undefined
    ? [flag, "--remote"]
    : fromEnv !== undefined && fromEnv !== ""
    ? [fromEnv, "GROVE_REMOTE"]
    : [fallback, "default"]
  const remote = normaliseRemote(raw)
  return remote === undefined ? { error: `${origin}: not an http(s) server address: ${raw}` } : { remote }
}
