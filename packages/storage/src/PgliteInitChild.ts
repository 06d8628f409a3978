/**
 * Run by PgliteInit.ts in a process of its own: creates a PGlite data directory (initdb) and closes it.
 * Its WebAssembly memory, grown by initdb, goes back to the system when this process exits.
 *
 *   node PgliteInitChild.ts <dir> <start parameters as JSON>
 */
import { PGlite } from "@electric-sql/pglite"

const [dir, params] = process.argv.slice(2)
if (dir === undefined || params === undefined) throw new Error("usage: PgliteInitChild.ts <dir> <start parameters as JSON>")
// The parent holds our stdin: its end means the parent is gone, and an init no one waits for stops.
process.stdin.on("end", () => process.exit(2)).resume()
const db = await PGlite.create({ dataDir: dir, startParams: JSON.parse(params) })
await db.close()
process.exit(0)
