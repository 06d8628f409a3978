#!/usr/bin/env node
// The Grove server. Node 24 runs the TypeScript sources directly.
//
// `serve` runs with a young generation of at most 2 x 8 MiB: left to itself V8 grows it to 128 MiB while the
// modules load and keeps it, most of it resident (a restarted embedded server idled at 346 MiB RSS, 283 MiB with
// this). The flag only takes effect at start-up, so the process replaces itself (same pid) once, before loading anything.
const YOUNG_GENERATION = "--max-semi-space-size=8"
if (
  process.argv[2] === "serve" && typeof process.execve === "function" &&
  !process.execArgv.some((arg) => arg.startsWith("--max-semi-space-size"))
) {
  process.execve(process.execPath, [process.execPath, YOUNG_GENERATION, ...process.execArgv, ...process.argv.slice(1)], process.env)
}
await import("../src/main.ts")
