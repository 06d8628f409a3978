/**
 * The `grove` program (src/Run.ts runs it against the real environment). `grove --version` alone is
 * answered before anything else is loaded: the command tree and Effect's runtime are most of a start
 * (`--version` with anything else still goes through effect/cli, which prints the same line), and the
 * argument-less content commands run without the tree (Direct.ts). A plain clone's pull is sent before Effect loads.
 */
import { homedir } from "node:os"
import { VERSION_LINE } from "./BuildInfo.ts"
import { writeStdout } from "./Stdout.ts"

const argv = process.argv.slice(2)
if (argv.length === 1 && (argv[0] === "--version" || argv[0] === "-v")) {
  writeStdout(`${VERSION_LINE}\n`)
} else {
  // A plain clone's pull goes out before Effect and the clone's modules load (EarlyPull.ts): ~60 ms sooner.
  const early = argv.includes("clone") ? await import("./EarlyPull.ts") : undefined
  await early?.sendEarlyPull({ argv, env: process.env, cwd: process.cwd(), home: homedir() })
  const { runMain } = await import("./Run.ts")
  process.exitCode = await runMain(argv)
  early?.dropEarlyPull()
}
