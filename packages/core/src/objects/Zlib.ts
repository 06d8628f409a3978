/**
 * node:zlib on first use rather than by import: loading it costs ~2 ms of a short run's start (a small push,
 * a server that has not yet compressed anything), and most runs compress nothing. `import type` only, so the
 * module names no Node module at load.
 */
import type * as NodeZlib from "node:zlib"

let loaded: typeof NodeZlib | undefined

/** Node's zlib module, loaded on the first call. */
export const zlib = (): typeof NodeZlib => loaded ??= process.getBuiltinModule("node:zlib")
