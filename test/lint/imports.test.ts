/**
 * The import-direction check of `npm run lint` (scripts/lint/imports.ts): it passes on the real
 * tree and fails, naming the import and the rule, on each kind of wrong import planted in a copy.
 */
import { describe, expect, it } from "@effect/vitest"
import * as path from "node:path"
import { checkPackages, checkServer, importsOf, readPackageSources, readSources, type Violation } from "../../scripts/lint/imports.ts"

const PACKAGES = path.resolve(import.meta.dirname, "../../packages")
const server = () => readSources(path.join(PACKAGES, "server/src"))

/**
 * What the check finds in the real server tree with `line` added at the top of `file`, beyond what it
 * finds in the tree as it is (so a fixture shows only its own import, whatever else is in progress).
 */
const withImport = (file: string, line: string) => {
  const files = server()
  const key = (v: Violation) => `${v.rule} ${v.from} ${v.to}`
  const before = new Set(checkServer(files).map(key))
  files.set(file, `${line}\n${files.get(file) ?? ""}`)
  return checkServer(files).filter((v) => !before.has(key(v)))
}

describe("import check", () => {
  it("reads static, type-only, re-exported, multi-line and dynamic imports", () => {
    const source = [
      `import { a } from "./A.ts"`,
      `import type { B } from "../b/B.ts"`,
      `export { c } from "./C.ts"`,
      `import {\n  d,\n  e\n} from "./D.ts"`,
      `import * as F from "@grove/core"`,
      `const g = await import("./G.ts")`,
      `// "from" in a comment: import nothing`
    ].join("\n")
    expect(importsOf(source)).toEqual(["./A.ts", "../b/B.ts", "./C.ts", "./D.ts", "@grove/core", "./G.ts"])
  })

  it("passes on the real server tree and the real packages", () => {
    expect(checkServer(server())).toEqual([])
    expect(checkPackages(readPackageSources(PACKAGES))).toEqual([])
  })

  it("fails on an import up a floor: entities importing a feature (which also closes a pair: merges import entities)", () => {
    const violations = withImport("entities/Sending.ts", `import type { MergeError } from "../merges/MergeCommand.ts"`)
    expect(violations).toEqual([
      expect.objectContaining({ from: "entities/Sending.ts", to: "merges/MergeCommand.ts", rule: "up-a-floor" }),
      expect.objectContaining({ from: "entities/Sending.ts", to: "merges/MergeCommand.ts", rule: "folder-pair" })
    ])
  })

  it("fails on the edge kit importing content", () => {
    const violations = withImport("http/Failures.ts", `import { ContentObjects } from "../content/ContentObjects.ts"`)
    expect(violations.map((v) => v.rule)).toEqual(["up-a-floor", "folder-pair"])
  })

  it("fails on a feature importing another feature's handlers or entity slice, not its errors or read services", () => {
    const handlers = withImport("repos/ReposHandlers.ts", `import { MergeHandlers } from "../merges/MergeHandlers.ts"`)
    expect(handlers).toEqual([expect.objectContaining({ from: "repos/ReposHandlers.ts", to: "merges/MergeHandlers.ts", rule: "feature-private" })])
    const slice = withImport("webhooks/WebhookGateway.ts", `import * as C from "../ci/CiSecretCommands.ts"`)
    expect(slice.map((v) => v.rule)).toEqual(["feature-private"])
    expect(withImport("repos/ReposHandlers.ts", `import { ciApiError } from "../ci/CiErrors.ts"`)).toEqual([])
    expect(withImport("repos/ReposHandlers.ts", `import { callerPolicy } from "../path-permissions/CallerPolicy.ts"`)).toEqual([])
  })

  it("fails on two folders importing each other", () => {
    // sync/ChunkLinks.ts imports ci/CiSecrets.ts (SecretBox): an import back from ci/ closes a pair.
    const violations = withImport("ci/CiRuns.ts", `import { ChunkLinks } from "../sync/ChunkLinks.ts"`)
    expect(violations).toEqual([expect.objectContaining({ rule: "folder-pair", message: expect.stringMatching(/ci and sync import each other/) })])
  })

  it("lets the wiring import anything", () => {
    expect(withImport("Entities.ts", `import { MergeHandlers } from "./merges/MergeHandlers.ts"`)).toEqual([])
  })

  it("fails on the cli importing the server, and on core doing IO outside its tests", () => {
    const files = readPackageSources(PACKAGES)
    files.set("cli/src/Wrong.ts", `import { App } from "@grove/server/App"`)
    files.set("core/src/Wrong.ts", `import * as fs from "node:fs"`)
    files.set("core/src/Fine.test.ts", `import * as fs from "node:fs"`)
    expect(checkPackages(files)).toEqual([
      expect.objectContaining({ from: "cli/src/Wrong.ts", to: "@grove/server/App", rule: "package-direction" }),
      expect.objectContaining({ from: "core/src/Wrong.ts", to: "node:fs", rule: "core-io" })
    ])
  })
})
