import { createRequire } from "node:module"

const require = createRequire(import.meta.url)

/** The server version: the root package's version. */
export const SERVER_VERSION: string = (require("../../../package.json") as { version: string }).version
