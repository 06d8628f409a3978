/**
 * Where a checkout's watcher (`grove watch`, WatchDaemon.ts) keeps its files: all under `.grove/watch/`, which the
 * working-tree walk never enters (`.grove` is not content). No Effect here: the quick path (NoopPush.ts) reads them.
 */
import * as path from "node:path"

export const watchDir = (root: string): string => path.join(root, ".grove", "watch")
/** The daemon's unix socket. */
export const socketPath = (root: string): string => path.join(watchDir(root), "sock")
/** Where a client writes its cookie file: the daemon answers once it has seen the cookie's event. */
export const cookieDir = (root: string): string => path.join(watchDir(root), "cookies")
/** The last token under which the tree was seen equal to the index (WatchClient.ts). */
export const tokenStatePath = (root: string): string => path.join(watchDir(root), "token.json")
/** The daemon's stderr and its reason for exiting. */
export const logPath = (root: string): string => path.join(watchDir(root), "log")

/** A unix socket's path is at most 107 bytes on Linux (sun_path). */
export const SOCKET_PATH_MAX = 107

/** Names never walked nor watched, at any depth: the working-tree walk's. */
export { IGNORED_DIRS as IGNORED_NAMES } from "../local/TreeWalk.ts"

/**
 * What a directory's `.grove` makes of it: "checkout" (another checkout's root) is neither walked into nor watched. The
 * daemon asks without the index, so it may take for a checkout a folder the walk takes for content (a `.grove` the index
 * tracks under): the walk then records that folder unsettled, and no token is kept (WatchClient.tokenForWrittenIndex).
 */
export { groveAt } from "../local/TreeWalk.ts"

/** The request a client sends (one JSON line), and the answer (one JSON line). */
export interface WatchRequest {
  /** The token of the last answer this client trusts, or null for "just give me a token". */
  readonly since: string | null
  /** The cookie file's name under cookieDir: the answer comes after the daemon has seen it. */
  readonly cookie: string
}

export type WatchAnswer =
  & {
    /** The daemon's process (`grove watch stop` signals it). */
    readonly pid: number
  }
  & (
    /** Every path (relative, "/"-separated) that changed since `since`; `token` covers all of them. */
    | { readonly token: string; readonly changed: ReadonlyArray<string> }
    /** `since` is unknown here (another daemon, lost events, too many changes): scan everything. */
    | { readonly token: string; readonly full: true }
  )
