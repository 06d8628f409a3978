/**
 * The credentials file's form (`~/.grove/credentials`: an object of login sessions keyed by server URL), without
 * Effect: Credentials.ts reads and writes it, and the small push (SmallPush.ts) reads it before the client loads. One
 * definition, so the two never disagree on what a valid file is.
 */

export interface StoredSession {
  readonly token: string
  readonly username: string
  readonly expires_at?: string
  readonly created_at: string
}

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null && !Array.isArray(value)

/** The session as stored (its known fields only), or undefined when `value` is not one. */
const sessionOf = (value: unknown): StoredSession | undefined => {
  if (!isRecord(value)) return undefined
  const { created_at, expires_at, token, username } = value
  if (typeof token !== "string" || typeof username !== "string" || typeof created_at !== "string") return undefined
  if (expires_at !== undefined && typeof expires_at !== "string") return undefined
  return expires_at === undefined ? { token, username, created_at } : { token, username, expires_at, created_at }
}

/** Every session of the file's text, or undefined when the text is not a valid credentials file (any entry invalid). */
export const parseSessions = (text: string): Record<string, StoredSession> | undefined => {
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch {
    return undefined
  }
  if (!isRecord(parsed)) return undefined
  const sessions: Record<string, StoredSession> = {}
  for (const [remote, value] of Object.entries(parsed)) {
    const session = sessionOf(value)
    if (session === undefined) return undefined
    sessions[remote] = session
  }
  return sessions
}

/** A session past its expiry (a session without one never expires). */
export const sessionExpired = (session: StoredSession, now: number = Date.now()): boolean =>
  session.expires_at !== undefined && Date.parse(session.expires_at) <= now

/** The server of the newest session (the last one logged in to), or undefined when there is none. */
export const lastLoginIn = (sessions: Readonly<Record<string, StoredSession>>): string | undefined =>
  Object.entries(sessions).sort(([, a], [, b]) => Date.parse(b.created_at) - Date.parse(a.created_at))[0]?.[0]
