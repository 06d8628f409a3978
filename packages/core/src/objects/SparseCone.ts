/**
 * A sparse checkout's cone, as the Oak client sends it (`pull?paths=a,b/c`): path prefixes, each
 * covering itself and what lies under it on a `/` boundary (oak-core sparse.rs). A sparse pull
 * sends every tree (so manifests still verify) but only the blobs at covered paths.
 */
import { hasControlCharacters } from "../Names.ts"

export const MAX_PREFIXES = 256
export const MAX_PREFIX_BYTES = 4096

export const normalizePrefix = (raw: string): string => raw.trim().replaceAll("\\", "/").replace(/^\/+|\/+$/g, "")

/** The cone of a `paths` parameter, or why it is unusable; undefined when it names nothing (a full pull). */
export const parseCone = (raw: string): { readonly ok: true; readonly prefixes: ReadonlyArray<string> | undefined } | { readonly ok: false; readonly reason: string } => {
  const prefixes = [...new Set(raw.split(",").map(normalizePrefix).filter((p) => p !== ""))]
  if (prefixes.length > MAX_PREFIXES) return { ok: false, reason: `paths names at most ${MAX_PREFIXES} prefixes` }
  for (const p of prefixes) {
    if (Buffer.byteLength(p) > MAX_PREFIX_BYTES) return { ok: false, reason: `a path prefix is at most ${MAX_PREFIX_BYTES} bytes` }
    if (hasControlCharacters(p)) return { ok: false, reason: "a path prefix must not contain control characters" }
    if (p.split("/").some((s) => s === "." || s === "..")) return { ok: false, reason: "a path prefix must not contain '.' or '..' segments" }
  }
  return { ok: true, prefixes: prefixes.length === 0 ? undefined : prefixes }
}

const covers = (prefix: string, path: string) => path === prefix || (path.startsWith(prefix) && path[prefix.length] === "/")

/** Whether `path` is inside the cone. */
export const inCone = (prefixes: ReadonlyArray<string>, path: string) => prefixes.some((p) => covers(p, path))

/** Whether anything at or under directory `dir` can be inside the cone (the walk descends only there). */
export const reachesCone = (prefixes: ReadonlyArray<string>, dir: string) =>
  dir === "" || prefixes.some((p) => covers(p, dir) || covers(dir, p))

export interface ConeTree {
  readonly hash: string
  readonly entries: ReadonlyArray<{ readonly name: string; readonly kind: string; readonly hash: string }>
}

/** The blobs at covered paths of the trees under `roots`. */
export const blobsInCone = (prefixes: ReadonlyArray<string>, roots: ReadonlyArray<string>, trees: ReadonlyArray<ConeTree>): Set<string> => {
  const byHash = new Map(trees.map((t) => [t.hash, t]))
  const found = new Set<string>()
  const seen = new Set<string>()
  const stack: Array<[string, string]> = roots.map((r) => [r, ""])
  for (let next = stack.pop(); next !== undefined; next = stack.pop()) {
    const [hash, dir] = next
    // The same tree at the same place needs one walk; the same tree elsewhere may cover other paths.
    if (seen.has(`${hash}\0${dir}`)) continue
    seen.add(`${hash}\0${dir}`)
    for (const e of byHash.get(hash)?.entries ?? []) {
      const path = dir === "" ? e.name : `${dir}/${e.name}`
      if (e.kind === "tree") {
        if (reachesCone(prefixes, path)) stack.push([e.hash, path])
      } else if (inCone(prefixes, path)) found.add(e.hash)
    }
  }
  return found
}
