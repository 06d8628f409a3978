/**
 * The import-direction check (`npm run lint`): inside packages/server/src imports go down the floors
 * base < access < entities < http < content < web < features < wiring, a feature imports another feature
 * only through that folder's public modules, and no two folders import each other. Across packages,
 * each package imports only the packages below it (cli never imports the server), and core's
 * sources do no IO of their own. docs/architecture.md describes the house this keeps.
 *
 * Run: `node scripts/lint/imports.ts` (exits 1 and lists the imports that break the rule).
 */
import * as fs from "node:fs"
import * as path from "node:path"

export const FLOORS = ["base", "access", "entities", "http", "content", "web", "features", "wiring"] as const
export type Floor = typeof FLOORS[number]

/** The units of packages/server/src (a top-level folder, or a file at the root) that are not features. */
const UNIT_FLOORS: Record<string, Floor> = {
  "Config.ts": "base",
  "FeatureConfig.ts": "base",
  "Version.ts": "base",
  "net.ts": "base",
  db: "base",
  cache: "base",
  egress: "base",
  export: "base",
  access: "access",
  entities: "entities",
  http: "http",
  content: "content",
  web: "web",
  "main.ts": "wiring",
  "Server.ts": "wiring",
  "App.ts": "wiring",
  "Entities.ts": "wiring",
  "Infrastructure.ts": "wiring",
  admin: "wiring"
}

/**
 * What another feature may not import: a feature's handlers (`*Handlers.ts`, `*Routes.ts`, `*Page.ts`,
 * `*Pages.ts`) and its slice of an entity (`*Command.ts`, `*Commands.ts`, composed only by the wiring).
 * Every other module of a feature folder is its public surface: read services, errors and their
 * mapping (`*Errors.ts`), gateways, records, planners, command support.
 */
const PRIVATE_SUFFIXES = ["Handlers.ts", "Routes.ts", "Page.ts", "Pages.ts", "Command.ts", "Commands.ts"]

/** Where a unit sits: its floor by the table above; any other folder is a feature. */
export const floorOf = (unit: string): Floor => UNIT_FLOORS[unit] ?? (unit.endsWith(".ts") ? "wiring" : "features")

export const isPublic = (file: string) => {
  const name = path.posix.basename(file).replace(/\.test\.ts$/, ".ts")
  return !PRIVATE_SUFFIXES.some((suffix) => name.endsWith(suffix))
}

/** The specifiers a TypeScript source imports or re-exports (static, dynamic and type-only alike). */
export const importsOf = (source: string): Array<string> => {
  const found: Array<string> = []
  const pattern = /(?:^|[\s;}])(?:import|export)\s(?:[^'"`;]*?\sfrom\s)?["']([^"']+)["']|\bimport\(\s*["']([^"']+)["']\s*\)/gm
  for (const match of source.matchAll(pattern)) found.push((match[1] ?? match[2])!)
  return found
}

export interface Violation {
  readonly from: string
  readonly to: string
  readonly rule: "up-a-floor" | "feature-private" | "folder-pair" | "package-direction" | "core-io"
  readonly message: string
}

/** `files`: paths relative to packages/server/src (posix) -> source text. */
export const checkServer = (files: ReadonlyMap<string, string>): Array<Violation> => {
  const violations: Array<Violation> = []
  const unitImports = new Map<string, Map<string, { from: string; to: string }>>()
  for (const [from, source] of files) {
    const fromUnit = from.split("/")[0]!
    for (const specifier of importsOf(source)) {
      if (!specifier.startsWith(".")) continue
      const to = path.posix.normalize(path.posix.join(path.posix.dirname(from), specifier))
      if (to.startsWith("..")) continue
      const toUnit = to.split("/")[0]!
      if (toUnit === fromUnit) continue
      const [fromFloor, toFloor] = [floorOf(fromUnit), floorOf(toUnit)]
      if (FLOORS.indexOf(toFloor) > FLOORS.indexOf(fromFloor)) {
        violations.push({ from, to, rule: "up-a-floor", message: `${fromFloor} imports ${toFloor} (up a floor)` })
      } else if (fromFloor === "features" && toFloor === "features" && !isPublic(to)) {
        violations.push({ from, to, rule: "feature-private", message: `feature ${fromUnit}/ imports a private module of feature ${toUnit}/` })
      }
      const targets = unitImports.get(fromUnit) ?? new Map()
      if (!targets.has(toUnit)) targets.set(toUnit, { from, to })
      unitImports.set(fromUnit, targets)
    }
  }
  for (const [a, targets] of unitImports) {
    for (const [b, edge] of targets) {
      const back = unitImports.get(b)?.get(a)
      if (back !== undefined && a < b) {
        violations.push({ from: edge.from, to: edge.to, rule: "folder-pair", message: `${a} and ${b} import each other (also ${back.from} -> ${back.to})` })
      }
    }
  }
  return violations
}

/** Which workspace packages each package may import: the packages below it. */
export const PACKAGE_DEPENDENCIES: Record<string, ReadonlyArray<string>> = {
  core: [],
  storage: [],
  api: ["core"],
  bus: ["storage"],
  cli: ["api", "core"],
  server: ["api", "bus", "core", "storage"]
}

/** Node modules that do IO: core computes, the packages above it read and write. */
const IO_MODULES = /^node:(fs|fs\/promises|child_process|net|http|https|http2|dgram|dns|tls|worker_threads|cluster)$/

/** `files`: paths relative to packages/ (posix, `<package>/src/...`) -> source text. */
export const checkPackages = (files: ReadonlyMap<string, string>): Array<Violation> => {
  const violations: Array<Violation> = []
  for (const [from, source] of files) {
    const pkg = from.split("/")[0]!
    const allowed = PACKAGE_DEPENDENCIES[pkg]
    for (const specifier of importsOf(source)) {
      const grove = /^@grove\/([^/]+)/.exec(specifier)?.[1]
      if (grove !== undefined && grove !== pkg && allowed !== undefined && !allowed.includes(grove)) {
        violations.push({ from, to: specifier, rule: "package-direction", message: `${pkg} may import only ${allowed.join(", ") || "no other package"}` })
      }
      if (pkg === "core" && IO_MODULES.test(specifier) && !/\.test(ing)?\.ts$/.test(from)) {
        violations.push({ from, to: specifier, rule: "core-io", message: "core does no IO (tests may)" })
      }
    }
  }
  return violations
}

/** Every `.ts` file under `root`, keyed by its posix path relative to `root`. */
export const readSources = (root: string): Map<string, string> => {
  const files = new Map<string, string>()
  for (const entry of fs.readdirSync(root, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile() || !entry.name.endsWith(".ts")) continue
    const full = path.join(entry.parentPath, entry.name)
    files.set(path.relative(root, full).split(path.sep).join("/"), fs.readFileSync(full, "utf8"))
  }
  return files
}

/** The package sources (`<package>/src/...`) under `packagesDir`. */
export const readPackageSources = (packagesDir: string): Map<string, string> => {
  const files = new Map<string, string>()
  for (const pkg of fs.readdirSync(packagesDir)) {
    const src = path.join(packagesDir, pkg, "src")
    if (!fs.existsSync(src)) continue
    for (const [file, text] of readSources(src)) files.set(`${pkg}/src/${file}`, text)
  }
  return files
}

if (import.meta.main) {
  const packages = path.resolve(import.meta.dirname, "../../packages")
  const violations = [
    ...checkServer(readSources(path.join(packages, "server/src"))).map((v) => ({ ...v, from: `server/src/${v.from}`, to: `server/src/${v.to}` })),
    ...checkPackages(readPackageSources(packages))
  ]
  for (const v of violations) console.error(`packages/${v.from} -> ${v.to}: ${v.rule}: ${v.message}`)
  if (violations.length > 0) {
    console.error(`\n${violations.length} import(s) break the direction rule (docs/architecture.md)`)
    process.exit(1)
  }
  console.log("imports: every import goes down (docs/architecture.md)")
}
