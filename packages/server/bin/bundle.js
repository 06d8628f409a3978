// Where the server's bundle lives and whether it is current (used by ./grove-server.js and
// ../scripts/bundle.ts). The bundle is built from the workspace sources it imports and the installed
// dependencies; its manifest (inputs.json) lists those sources and the lock file (an install changes
// dependencies), and it is current while it is newer than each of them. A source no input imports
// cannot change the bundle until an input imports it (an edit of that input), so nothing else is read.
import * as fs from "node:fs"

const root = new URL("../../../", import.meta.url)
export const BUNDLE_DIR = new URL("../dist/", import.meta.url)
export const ENTRY = "grove-server.mjs"
export const MANIFEST = "inputs.json"

const readManifest = (dir) => JSON.parse(fs.readFileSync(new URL(MANIFEST, dir), "utf8"))
/** The newest mtime of `inputs` (paths from the repository's root); throws when one is gone. */
const newestOf = (inputs) => inputs.reduce((latest, input) => Math.max(latest, fs.statSync(new URL(input, root)).mtimeMs), 0)

/** The newest mtime of the inputs `dir`'s manifest lists; Infinity when one is gone or there is no manifest. */
export const newestInput = (dir = BUNDLE_DIR) => {
  try {
    return newestOf(readManifest(dir).inputs)
  } catch {
    return Infinity
  }
}

/**
 * Whether `grove-server` runs the bundle: when it is newer than every input. A sealed bundle (built with
 * `--sealed`, as the Docker image builds it: its sources never change) is not compared with them.
 * GROVE_NO_BUNDLE=1 runs the sources; GROVE_BUNDLE=1 the bundle as built, even if sources changed since.
 */
export const bundleIsFresh = (dir = BUNDLE_DIR) => {
  if (process.env.GROVE_NO_BUNDLE === "1") return false
  try {
    const built = fs.statSync(new URL(ENTRY, dir)).mtimeMs
    if (process.env.GROVE_BUNDLE === "1") return true
    const manifest = readManifest(dir)
    return manifest.sealed === true || newestOf(manifest.inputs) < built
  } catch {
    return false
  }
}
