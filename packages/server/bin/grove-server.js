#!/usr/bin/env node
// The Grove server. Node 24 runs the TypeScript sources directly; when the server is bundled
// (packages/server/scripts/bundle.ts, run by `npm install` and `npm start`) and the bundle is newer
// than every source, the bundle runs instead: less memory and a faster start.
//
// `serve` replaces itself (same pid) once, before loading anything, for two settings read only at start-up:
// - a young generation of at most 2 x 8 MiB: left to itself V8 grows it to 128 MiB while the modules load
//   and keeps it, most of it resident (a restarted embedded server idled at 346 MiB RSS, 283 MiB with this);
// - glibc's malloc with a fixed mmap threshold (any malloc tunable fixes it): by default it rises to
//   32 MiB after the first large free, so the ~600 MiB V8 allocates and frees while compiling PGlite's
//   WebAssembly stays in malloc's arenas afterwards (~60 MiB of a restarted server's RSS);
// - `gc` exposed: once idle after a big transfer the server collects its garbage (src/ops/IdleGc.ts).
import { bundleIsFresh } from "./bundle.js"

// An older Node fails deep inside the server (the embedded database would not open): say which Node it needs, as the
// grove command does (package.json's engines).
const [nodeMajor, nodeMinor] = process.versions.node.split(".").map(Number)
if (nodeMajor < 24 || (nodeMajor === 24 && nodeMinor < 6)) {
  process.stderr.write(
    `grove-server needs Node 24.6 or newer; this is ${nodeMajor}.x (${process.version}, ${process.execPath}).\n` +
      "Put a newer Node first on the PATH: a Grove checkout has one after npm install, in node_modules/.bin.\n"
  )
  process.exit(1)
}

// `serve` is also what runs with no command (src/main.ts).
const serving = (process.argv[2] ?? "serve") === "serve"

const YOUNG_GENERATION = "--max-semi-space-size=8"
const EXPOSE_GC = "--expose-gc"
// An old generation that starts at 128 MiB: left to itself V8 starts its limit just above the ~55 MiB a
// server holds live, and a first-booted or restarted server's pushes ran many Mark-Compacts (M.md). Measured,
// alternating, 50 MiB / 5000-file pushes: server CPU of push 2 3.1-3.8 s vs 4.7 s without; idle RSS after a
// restart 191-195 MiB either way (64 MiB did not help).
const OLD_GENERATION = "--initial-old-space-size=128"
// Measured, not taken: glibc.malloc.mmap_threshold=32768 (blocks of 32 KiB and more get mappings of their own,
// returned when freed) holds 60-110 MiB less after a 200 MiB push and clone, but cost the clone +30% server CPU
// (one pair of runs); an operator may set GLIBC_TUNABLES so (npm run bench:memory -- --transfer).
const MALLOC_TUNABLES = "glibc.malloc.trim_threshold=131072"
// Measured, not taken (s14 M): V8's WebAssembly tiering flags for PGlite. Warm, its Liftoff (baseline) code is
// ~5% of a merge's samples, spread over hundreds of functions. --no-wasm-dynamic-tiering (each function TurboFan
// from its first call): idle RSS after a restart +17-20 MiB, +1.5 s CPU at start, merges' CPU within noise once warm.
// --wasm-tiering-budget=1000000 or 3000000: +4-6 MiB; the tier-up compiles only move into the first requests.
if (
  serving && typeof process.execve === "function" &&
  !process.execArgv.some((arg) => arg.startsWith("--max-semi-space-size"))
) {
  const env = { ...process.env }
  if (env.GLIBC_TUNABLES === undefined) env.GLIBC_TUNABLES = env.GROVE_SET_TUNABLES = MALLOC_TUNABLES
  process.execve(process.execPath, [process.execPath, YOUNG_GENERATION, OLD_GENERATION, EXPOSE_GC, ...process.execArgv, ...process.argv.slice(1)], env)
}
// Read by glibc at start only: what the server starts (CI steps, git) gets the system's default.
if (process.env.GROVE_SET_TUNABLES !== undefined) {
  delete process.env.GLIBC_TUNABLES
  delete process.env.GROVE_SET_TUNABLES
}
// Before anything of the server runs (tick-warmup.js says why): node:http's ticks cost 6x otherwise.
// GROVE_TICK_WARMUP=0 leaves it out (to measure it).
if (serving && process.env.GROVE_TICK_WARMUP !== "0") await (await import("./tick-warmup.js")).warmNextTick()
await import(bundleIsFresh() ? "../dist/grove-server.mjs" : "../src/main.ts")
