/**
 * Builds `packages/cli/dist/` (gitignored): the `grove` client as one ES module
 * per entry (commands in chunks of their own), so a run loads a few files instead of hundreds of TypeScript sources
 * (start-up ~185 ms -> ~100 ms). Run by the root `postinstall`; `bin/start.js`
 * uses the bundle only while it is newer than every source it was built from
 * (`bundleIsFresh` in bin/start.js), so edited sources never run stale.
 *
 *   node packages/cli/scripts/bundle.ts
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { nodeBundleOptions } from "../../../scripts/bundle/options.ts"
import { rewriteBundleBuiltins } from "../../../scripts/bundle/builtins-by-getter.ts"

const cli = path.resolve(import.meta.dirname, "..")
const outdir = path.join(cli, "dist")
const temp = `${outdir}.${process.pid}.tmp`

const started = performance.now()
try {
  const { build } = await import("esbuild")
  fs.rmSync(temp, { recursive: true, force: true })
  const built = await build(nodeBundleOptions({
    entryPoints: {
      grove: path.join(cli, "src/main.ts"),
      "noop-push": path.join(cli, "src/NoopPush.ts"),
      // `grove watch start`'s background process (src/watch/WatchDaemon.ts).
      "watch-daemon": path.join(cli, "src/watch/WatchDaemonMain.ts")
    },
    outdir: temp,
    // A native addon, loaded with require() when present.
    external: ["@napi-rs/blake-hash-linux-x64-gnu"],
    // `x instanceof FormData` without loading undici (see the file).
    inject: [path.join(cli, "scripts/form-data-shim.js")],
    metafile: true
  }))
  // `grove --version` 35 -> 31 ms CPU, the watched no-op push ~5 ms less (see the file).
  const leftAsBuilt = rewriteBundleBuiltins(built.metafile!, process.cwd())
  if (leftAsBuilt.length > 0) console.error(`grove: Node's modules are imported as built in ${leftAsBuilt.join(", ")}`)
  // Swap the directories: a concurrent `grove` sees the old bundle or the new one.
  const old = `${outdir}.${process.pid}.old`
  if (fs.existsSync(outdir)) fs.renameSync(outdir, old)
  fs.renameSync(temp, outdir)
  fs.rmSync(old, { recursive: true, force: true })
  console.error(`grove: bundled the client into ${outdir} in ${Math.round(performance.now() - started)} ms`)
} catch (error) {
  // Never fail an install over it: without a bundle the client runs from its sources.
  fs.rmSync(temp, { recursive: true, force: true })
  console.error(`grove: not bundling the client (${error instanceof Error ? error.message : String(error)}); it runs from its sources`)
}
