/**
 * Builds `packages/server/dist/` (gitignored): the server as one minified ES module plus chunks loaded on
 * demand, which `bin/grove-server.js` runs while it is newer than every source it was built from (`bin/bundle.js`).
 * Why: V8 keeps every module's source text in the heap. From the sources that is effect's modules with
 * their doc comments and every module of each package index; the bundle keeps only what the server
 * uses, minified. Measured on a restarted embedded server, idle: ~30 MiB less RSS, and a faster start.
 *
 *   node packages/server/scripts/bundle.ts [--if-stale] [--sealed]
 *
 * --if-stale: only when an input changed since. --sealed: for an image (docker/Dockerfile) whose sources never
 * change: `grove-server` takes the bundle without comparing it with its inputs.
 *
 * Only effect, @effect/* and the workspace packages are bundled; the other dependencies stay
 * external (PGlite finds its WASM and data files beside itself, native addons load with require).
 * `import.meta.url` and `import.meta.dirname` in the sources become their source file's, found from the
 * output file's own location, so files read beside a module (web assets, the root package.json, the init
 * child of PgliteInit.ts) are found from the bundle too, also once the repository is moved.
 */
import type { BuildOptions, Metafile } from "esbuild"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { rewriteBundleBuiltins } from "../../../scripts/bundle/builtins-by-getter.ts"
import { nodeBundleOptions } from "../../../scripts/bundle/options.ts"
import { BUNDLE_DIR, bundleIsFresh, ENTRY, MANIFEST, type Manifest } from "../bin/bundle.js"

const server = path.resolve(import.meta.dirname, "..")
const root = path.resolve(server, "../..")
const outdir = path.resolve(fileURLToPath(BUNDLE_DIR))
const BUNDLED = /^(effect|@effect\/|@grove\/)/
// Stands for the path from an output file to the repository's root (rootRelative): a bundle moved with
// its repository (an image built in one directory, run in another) still finds what is read beside its sources.
const ROOT_MARK = "__grove_root__/"

const packageName = (specifier: string) => specifier.split("/").slice(0, specifier.startsWith("@") ? 2 : 1).join("/")

/** esbuild's options for a build into `outdir`. */
const options = (outdir: string): BuildOptions => nodeBundleOptions({
  entryPoints: { "grove-server": path.join(server, "src/main.ts") },
  outdir,
  minify: true,
  // Class and function names show in errors, logs and spans.
  keepNames: true,
  legalComments: "none",
  // What the build read: its manifest of inputs.
  metafile: true,
  plugins: [{
    name: "grove-server",
    setup(b) {
      b.onResolve({ filter: /^[^./]/ }, (args) =>
        args.path.startsWith("node:") || !BUNDLED.test(packageName(args.path)) ? { external: true } : undefined)
      b.onLoad({ filter: /\/packages\/[^/]+\/src\/.*\.ts$/ }, (args) => {
        const text = fs.readFileSync(args.path, "utf8")
        if (!text.includes("import.meta.")) return undefined
        const source = ROOT_MARK + path.relative(root, args.path)
        return {
          loader: "ts",
          contents: text
            .replaceAll("import.meta.url", `new URL(${JSON.stringify(source)}, import.meta.url).href`)
            .replaceAll("import.meta.dirname", `decodeURIComponent(new URL(${JSON.stringify(`${path.dirname(source)}/`)}, import.meta.url).pathname).slice(0, -1)`)
        }
      })
    }
  }]
})

/** Replaces ROOT_MARK in the files built into `temp` by the path from where each will be in `target` to the root. */
const rootRelative = (temp: string, target: string) => {
  for (const file of fs.readdirSync(temp, { recursive: true, encoding: "utf8" }).filter((name) => name.endsWith(".mjs"))) {
    const text = fs.readFileSync(path.join(temp, file), "utf8")
    const up = `${path.relative(path.dirname(path.join(target, file)), root) || "."}/`
    if (text.includes(ROOT_MARK)) fs.writeFileSync(path.join(temp, file), text.replaceAll(ROOT_MARK, up))
  }
}

/**
 * Moves a build into `target` without taking anything from a server already running the old one: the
 * chunks (content-hashed names) are added beside the old ones, then the entry is renamed over the old
 * one. Chunks no build has written for a day go.
 */
const install = (temp: string, target: string) => {
  const chunks = path.join(target, "chunks")
  fs.mkdirSync(chunks, { recursive: true })
  const written = new Set(fs.readdirSync(path.join(temp, "chunks")))
  for (const name of written) fs.renameSync(path.join(temp, "chunks", name), path.join(chunks, name))
  const dayAgo = Date.now() - 86_400_000
  for (const name of fs.readdirSync(chunks)) {
    if (!written.has(name) && fs.statSync(path.join(chunks, name)).mtimeMs < dayAgo) fs.rmSync(path.join(chunks, name), { force: true })
  }
  fs.renameSync(path.join(temp, MANIFEST), path.join(target, MANIFEST))
  fs.renameSync(path.join(temp, ENTRY), path.join(target, ENTRY))
}

/**
 * The manifest `bin/bundle.js` checks: the repository's files the build read (the workspace sources,
 * infra/topics.json) and the lock file (the bundled dependencies change only with it), as paths from its root.
 */
const manifest = (metafile: Metafile, sealed: boolean): Manifest => ({
  inputs: [
    "package-lock.json",
    ...Object.keys(metafile.inputs)
      .map((input) => path.relative(root, path.resolve(input)))
      .filter((input) => !input.startsWith("..") && !input.includes("node_modules/"))
      .sort()
  ],
  ...(sealed ? { sealed } : {})
})

/**
 * Builds the bundle into `target`; answers the milliseconds it took. `sealed`: for an image whose sources
 * never change, `grove-server` then takes it without comparing it with them.
 */
export const bundleServer = async (target: string, sealed = false) => {
  const started = Date.now()
  const temp = `${target}.${process.pid}.tmp`
  const { build } = await import("esbuild")
  fs.rmSync(temp, { recursive: true, force: true })
  try {
    const { metafile } = await build(options(temp))
    // Node's modules by getter: an ES import builds the module's facade, which reads every export (see the file).
    const leftAsBuilt = rewriteBundleBuiltins(metafile, process.cwd())
    if (leftAsBuilt.length > 0) console.error(`grove-server: Node's modules are imported as built in ${leftAsBuilt.join(", ")}`)
    rootRelative(temp, target)
    fs.writeFileSync(path.join(temp, MANIFEST), JSON.stringify(manifest(metafile, sealed)))
    // Dated when the build started: a source edited during the build leaves the bundle stale.
    fs.utimesSync(path.join(temp, ENTRY), started / 1000, started / 1000)
  } catch (error) {
    fs.rmSync(temp, { recursive: true, force: true })
    throw error
  }
  install(temp, target)
  fs.rmSync(temp, { recursive: true, force: true })
  return Date.now() - started
}

if (import.meta.main) {
  if (process.argv.includes("--if-stale") && bundleIsFresh()) process.exit(0)
  try {
    const ms = await bundleServer(outdir, process.argv.includes("--sealed"))
    console.error(`grove-server: bundled the server into ${outdir} in ${ms} ms`)
  } catch (error) {
    // Never fail an install over it: without a bundle the server runs from its sources.
    console.error(`grove-server: not bundling the server (${error instanceof Error ? error.message : String(error)}); it runs from its sources`)
  }
}
