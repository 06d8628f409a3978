// Where the server's bundle lives and whether it is current (used by ./grove-server.js and
// ../scripts/bundle.ts). The bundle is built from the sources of these packages and the installed
// dependencies; it is current while it is newer than all of them.
import * as fs from "node:fs"

const packages = new URL("../../", import.meta.url)
export const BUNDLE_DIR = new URL("../dist/", import.meta.url)
export const ENTRY = "grove-server.mjs"
const SOURCES = ["core/src", "api/src", "storage/src", "bus/src", "server/src"]

/** The newest mtime of a directory tree (directories count: a removed file changes its directory). */
const newest = (dir) => {
  let latest = fs.statSync(dir).mtimeMs
  for (const entry of fs.readdirSync(dir, { withFileTypes: true, recursive: true })) {
    latest = Math.max(latest, fs.statSync(`${entry.parentPath}/${entry.name}`).mtimeMs)
  }
  return latest
}

/** The newest input of the bundle: every source file, and the lock file (an install changes dependencies). */
export const newestInput = () =>
  Math.max(fs.statSync(new URL("../package-lock.json", packages)).mtimeMs, ...SOURCES.map((dir) => newest(new URL(dir, packages))))

/**
 * Whether `grove-server` runs the bundle: when it is newer than every input. GROVE_NO_BUNDLE=1 runs the
 * sources; GROVE_BUNDLE=1 the bundle as built, even if sources changed since.
 */
export const bundleIsFresh = (dir = BUNDLE_DIR) => {
  if (process.env.GROVE_NO_BUNDLE === "1") return false
  try {
    const built = fs.statSync(new URL(ENTRY, dir)).mtimeMs
    return process.env.GROVE_BUNDLE === "1" || newestInput() < built
  } catch {
    return false
  }
}
