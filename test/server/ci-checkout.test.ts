/**
 * CI checkouts reused across runs (issue 24): the runs of one commit are copied from one base written
 * once, and no run ever sees another's changes. A step that rewrites a file in place (the change a
 * hard-linked copy would leak into the base), appends, deletes, creates and changes modes runs before,
 * and at the same time as, steps that check the tree is the commit's exactly: contents, the executable
 * bit, a symlink, ownership by the step's own user, and no base in reach. Another commit's run (a larger
 * tree, copied the other way) gets that commit's files.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { buildCommit, pushBody } from "../support/content.ts"
import { type GroveServer, startServer } from "../support/GroveServer.ts"
import { api } from "../support/http.ts"
import { ciRuns, logsOf } from "../support/ciRuns.ts"
import { waitFor } from "../support/waitFor.ts"

let server: GroveServer
let token = ""
// The server's CI work root, its own (the default is shared by every server on the host); traversable for the jobs' users.
const workRoot = fs.mkdtempSync(path.join(os.tmpdir(), "grove-ci-checkout-"))
fs.chmodSync(workRoot, 0o711)
const as = () => api(server.url, token)

// Branch two's commit also has this many files under bulk/: more than a base copied in one go (Workspace's
// SMALL_ENTRIES), so its checkouts take the other way, one file-system call after another.
const BULK = 40

const workflows = (expected: string, bulk: number): Record<string, string> => ({
  ".oak/workflows/dirty.yml": [
    "on: [manual]",
    "jobs:",
    "  dirty:",
    "    steps:",
    "      - run: |",
    "          echo tampered > data/a.txt",
    "          echo appended >> data/b.txt",
    "          rm tool.sh",
    "          echo planted > data/new.txt",
    "          chmod 600 data/b.txt",
    "          rm link && ln -s /etc/hostname link",
    "          echo dirtied"
  ].join("\n"),
  ".oak/workflows/check.yml": [
    "on: [manual]",
    "jobs:",
    "  check:",
    "    steps:",
    "      - run: |",
    `          test "$(cat data/a.txt)" = "${expected}"`,
    "          test \"$(cat data/b.txt)\" = b",
    "          test ! -e data/new.txt",
    "          test -x tool.sh && ./tool.sh",
    "          test \"$(readlink link)\" = data/a.txt",
    "          test \"$(stat -c %a data/b.txt)\" = 644",
    "          test \"$(stat -c %u data/a.txt)\" = \"$(id -u)\" && test \"$(stat -c %u data)\" = \"$(id -u)\" && test \"$(stat -c %u .)\" = \"$(id -u)\"",
    "          test ! -e ../.bases",
    `          test "$(ls bulk 2>/dev/null | wc -l)" = ${bulk}`,
    `          test "$(cat bulk/* 2>/dev/null | sort -u | wc -l)" = ${bulk}`,
    `          test ${bulk} = 0 || test "$(stat -c %u bulk/f${bulk - 1}.txt)" = "$(id -u)"`,
    "          echo pristine"
  ].join("\n")
})

const files = (expected: string, bulk: number) => ({
  ...workflows(expected, bulk),
  ...Object.fromEntries(Array.from({ length: bulk }, (_, i) => [`bulk/f${i}.txt`, `bulk file ${i}\n`])),
  "data/a.txt": `${expected}\n`,
  "data/b.txt": "b\n",
  "tool.sh": { content: "#!/bin/sh\necho tool-ran\n", mode: "executable" as const },
  "link": { content: "data/a.txt", mode: "symlink" as const }
})

const { start, completed } = ciRuns(as, "ops/app")

const expectConclusion = (run: any, marker: string) => {
  expect(run.conclusion, logsOf(run)).toBe("success")
  expect(logsOf(run)).toContain(marker)
}

beforeAll(async () => {
  server = await startServer({ args: ["--ci-concurrency", "4", "--ci-work-dir", workRoot] })
  token = await server.createUser("ops")
  expect((await as().post("/repos", { name: "app" })).status).toBe(201)
  for (const [branch, expected, bulk] of [["one", "first", 0], ["two", "second", BULK]] as const) {
    const c = buildCommit({ branch, files: files(expected, bulk) })
    const pushed = await as().post("/ops/app/push", pushBody({ branch, commits: [c], description: branch }))
    expect(pushed.body.success, JSON.stringify(pushed.body)).toBe(true)
  }
}, 300_000)

afterAll(async () => {
  await server?.stop()
  fs.rmSync(workRoot, { recursive: true, force: true })
})

describe("CI checkout reuse", () => {
  it("gives a run of the same commit a pristine tree after another run changed its own", async () => {
    expectConclusion(await completed(await start("dirty", "one")), "dirtied")
    expectConclusion(await completed(await start("check", "one")), "pristine")
  }, 180_000)

  it("keeps runs of one commit apart while they run at once", async () => {
    const ids = await Promise.all(["dirty", "check", "dirty", "check", "dirty", "check"].map((w) => start(w, "one")))
    const runs = await Promise.all(ids.map(completed))
    runs.forEach((run, i) => expectConclusion(run, i % 2 === 0 ? "dirtied" : "pristine"))
    // And after them all.
    expectConclusion(await completed(await start("check", "one")), "pristine")
  }, 240_000)

  it("gives a run of another commit that commit's files", async () => {
    expectConclusion(await completed(await start("check", "two")), "pristine")
    expectConclusion(await completed(await start("check", "one")), "pristine")
  }, 180_000)

  // A job's checkout is removed after its run's Finish (Runner's cleanups), no longer before it: still removed.
  it("removes every run's checkout once its run is over", async () => {
    expectConclusion(await completed(await start("dirty", "two")), "dirtied")
    const root = workRoot
    // This server's node directory is there (what is looked at below is not an empty guess).
    expect(fs.readdirSync(root).length).toBe(1)
    // A directory removed while it is looked at counts as gone.
    const list = (dir: string) => fs.existsSync(dir) ? fs.readdirSync(dir) : []
    // What is left beside the bases: only sandboxes still waiting for a job, whose directories are empty.
    const leftovers = () =>
      list(root).flatMap((node) => list(path.join(root, node)).filter((name) => name !== ".bases").map((name) => path.join(root, node, name)))
        .filter((dir) => fs.existsSync(dir) && !(path.basename(dir).startsWith("warm-") && list(dir).length === 0))
    await waitFor("the runs' checkouts removed", async () => leftovers().length === 0 || undefined, 60_000).catch((error) => {
      throw new Error(`${error}: ${leftovers().join(", ")}`)
    })
  }, 180_000)
})
