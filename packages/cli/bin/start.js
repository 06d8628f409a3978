// The Grove command-line client, started by ./grove.js once the Node version is known to be
// new enough. Node 24 runs the TypeScript sources directly; when
// `npm install` has bundled them into ../dist (packages/cli/scripts/bundle.ts) and the
// bundle is newer than every source (checked in a git checkout of them only), the bundle runs instead (a third of
// the start-up).
// The compile cache keeps start-up fast after the first run.
// Node's modules by getter, not by import: an import of node:fs builds its ES facade, which reads every export and so
// loads fs/promises and the streams (~3 ms of every start; see scripts/bundle.ts, which does the same for the bundle).
const fs = process.getBuiltinModule("node:fs")
const { enableCompileCache } = process.getBuiltinModule("node:module")
const { homedir } = process.getBuiltinModule("node:os")

/**
 * V8's code for the client (the bundle's compile is ~40% of a start without it), kept in the user's cache
 * directory. Node keys each entry by the file's path and checks a hash of its source, so an upgraded or
 * rebuilt bundle never runs stale code; a directory that cannot be written only costs the cache (Node
 * answers a status, it does not throw). NODE_COMPILE_CACHE, when set, wins (Node enabled it at start).
 */
const compileCacheDir = () => {
  const xdg = process.env.XDG_CACHE_HOME
  return `${xdg !== undefined && xdg.startsWith("/") ? xdg : `${homedir()}/.cache`}/grove/compile-cache`
}
/**
 * Makes `dir` one level at a time; false when it cannot be made. Node's own (recursive) making, which
 * enableCompileCache does, retries for ever where a file system answers ENOENT for a directory whose parent exists
 * (procfs: XDG_CACHE_HOME=/proc/x hung every command at ~30% CPU).
 */
const madeDir = (dir) => {
  // An absolute path only (a relative HOME makes a relative one): its parents are what the slices below give.
  if (!dir.startsWith("/")) return false
  if (fs.existsSync(dir)) return fs.statSync(dir).isDirectory()
  const parent = dir.slice(0, dir.lastIndexOf("/")) || "/"
  if (parent === dir || !madeDir(parent)) return false
  try {
    fs.mkdirSync(dir)
  } catch (error) {
    if (error?.code !== "EEXIST") return false
  }
  return true
}
try {
  const dir = compileCacheDir()
  if (madeDir(dir)) enableCompileCache?.(dir)
} catch {
  // Never a reason not to run.
}

const packages = new URL("../../", import.meta.url)
const dist = new URL("../dist/", import.meta.url)

/** The newest mtime of a directory tree (directories count: a removed file changes its directory). */
const newest = (dir) => {
  let latest = fs.statSync(dir).mtimeMs
  for (const entry of fs.readdirSync(dir, { withFileTypes: true, recursive: true })) {
    latest = Math.max(latest, fs.statSync(`${entry.parentPath}/${entry.name}`).mtimeMs)
  }
  return latest
}

/**
 * The sources are only edited in a git checkout of them: a client installed any other way (a copy, a tarball) was
 * bundled from the sources it holds, and its start skips the walk of ~200 files (a few ms of every command).
 */
const editableSources = () => fs.existsSync(new URL("../.git", packages))

const bundleIsFresh = () => {
  if (process.env.GROVE_NO_BUNDLE === "1") return false
  try {
    const built = Math.min(fs.statSync(new URL("grove.mjs", dist)).mtimeMs, fs.statSync(new URL("noop-push.mjs", dist)).mtimeMs)
    // GROVE_BUNDLE=1: the bundle as built, even if sources changed since (a benchmark measures the client it bundled).
    if (process.env.GROVE_BUNDLE === "1" || !editableSources()) return true
    return ["cli/src", "api/src", "core/src"].every((dir) => newest(new URL(dir, packages)) < built)
  } catch {
    return false
  }
}

/** `grove push` with nothing to push and `grove status` of an unchanged tree need no client (src/NoopPush.ts). */
const answerFromCheckout = async (args, fresh) => {
  const quick = args.includes("push") ? "noopPush" : args.includes("status") ? "quickStatus" : undefined
  if (quick === undefined) return undefined
  const module = await import(fresh ? "../dist/noop-push.mjs" : "../src/NoopPush.ts")
  try {
    const text = await module[quick]?.({ args, env: process.env, cwd: process.cwd(), home: homedir() })
    return text === undefined ? undefined : { text, module }
  } catch {
    return undefined // any doubt: the full command decides
  }
}

/**
 * Once a quick answer is written and nothing is left to run (no handle or request: its output went out through
 * fs.writeSync, not a stream still writing), the process ends at once: Node's own end of a process (its heap and
 * threads taken down) is ~4 ms of a ~100 ms no-op push at 20k files. After the ticks and promise reactions queued so
 * far, before the event loop turns: a turn would first run V8's own tasks, such as the young-generation collection
 * the check's garbage schedules (1-4 ms at 20k files, of memory about to be given back whole).
 */
const endWhenIdle = () =>
  process.nextTick(() => {
    if (process.getActiveResourcesInfo().length === 0) process.exit()
  })

/**
 * The bundle's chunks import each other as "./chunk-X.mjs" (~280 imports among ~55 chunks at a clone's start), and its
 * entries (grove.mjs, noop-push.mjs: 10 at a no-op push's start) import them as "./chunks/chunk-X.mjs": each is resolved
 * here by string, a chunk of that directory, instead of by Node's resolution (a URL parsed, a realpath and a
 * package.json lookup for the module's format each time): ~12-18 ms less CPU at a clone's start, ~2 at a no-op push's.
 */
const resolveChunks = () => {
  const root = dist.href
  const chunks = new URL("chunks/", dist).href
  /** The chunk `specifier` names from `parent`, when it is a plain name in the directory the import means. */
  const chunkOf = (specifier, parent) => {
    if (!specifier.endsWith(".mjs") || parent === undefined) return undefined
    const name = parent.startsWith(chunks) ? specifier.startsWith("./") && specifier.slice(2)
      : !parent.includes("/", root.length) && parent.startsWith(root) && specifier.startsWith("./chunks/") && specifier.slice(9)
    return name && !name.includes("/") ? chunks + name : undefined
  }
  process.getBuiltinModule("node:module").registerHooks?.({
    resolve: (specifier, context, next) => {
      const url = chunkOf(specifier, context.parentURL)
      return url === undefined ? next(specifier, context) : { url, format: "module", shortCircuit: true }
    }
  })
}

const fresh = bundleIsFresh()
if (fresh) resolveChunks()
const answer = await answerFromCheckout(process.argv.slice(2), fresh)
if (answer === undefined) await import(fresh ? "../dist/grove.mjs" : "../src/main.ts")
else {
  // (A bundle from before writeStdout: process.stdout.)
  const write = answer.module.writeStdout ?? ((text) => process.stdout.write(text))
  write(`${answer.text}\n`)
  endWhenIdle()
}
