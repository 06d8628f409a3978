/** The watcher's process (WatchDaemon.ts): `node WatchDaemonMain.ts <checkout root>`, started by `grove watch start`. */
import { runDaemon } from "./WatchDaemon.ts"

runDaemon(process.argv[2] ?? ".")
