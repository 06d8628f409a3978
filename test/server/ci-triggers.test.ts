/**
 * Which runs a push starts: a branch's first push (the `branch.created` event) runs the `push`
 * workflows too, as GitHub does, and every workflow runs exactly once per push, whichever of the
 * two events its `on` lists.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { buildCommit, pushBody } from "../support/content.ts"
import { type GroveServer, startServer } from "../support/GroveServer.ts"
import { api } from "../support/http.ts"
import { waitFor } from "../support/waitFor.ts"

let server: GroveServer
let token: string
const as = () => api(server.url, token)

const workflow = (on: string) => `on: ${on}\njobs:\n  a:\n    steps:\n      - run: echo "$GROVE_EVENT"\n`
const FILES = {
  ".oak/workflows/onpush.yml": workflow("[push]"),
  ".oak/workflows/pushstring.yml": workflow("push"),
  ".oak/workflows/both.yml": workflow("[push, branch.created]"),
  ".oak/workflows/created.yml": workflow("branch.created"),
  ".oak/workflows/manual.yml": workflow("[manual]"),
  ".oak/workflows/every.yml": "jobs:\n  a:\n    steps:\n      - run: echo every\n"
}

beforeAll(async () => {
  server = await startServer()
  token = await server.createUser("tess")
  expect((await as().post("/repos", { name: "app" })).status).toBe(201)
}, 300_000)

afterAll(async () => {
  await server?.stop()
})

/** The runs at `commit` in `repo`, once `count` of them are there, as `workflow event` sorted. */
const runsAt = (commit: string, count: number, repo = "app") =>
  waitFor(`${count} runs at ${commit.slice(0, 12)}`, async () => {
    const runs: Array<{ workflow_name: string; event: string; commit_hash: string }> = (await as().get(`/tess/${repo}/ci/runs`)).body
    const at = runs.filter((run) => run.commit_hash === commit)
    return at.length >= count ? at.map((run) => `${run.workflow_name} ${run.event}`).sort() : undefined
  })

describe("CI triggers", () => {
  it("a branch's first push runs the push workflows as well as the branch.created ones, each workflow once", async () => {
    const first = buildCommit({ branch: "feature", files: FILES })
    const pushed = await as().post("/tess/app/push", pushBody({ branch: "feature", commits: [first] }))
    expect(pushed.body.success, JSON.stringify(pushed.body)).toBe(true)
    // The push-only workflows are queued after the branch.created ones: once they are listed, all are.
    expect(await runsAt(first.commit.hash, 5)).toEqual([
      "both branch.created",
      "created branch.created",
      "every branch.created",
      "onpush push",
      "pushstring push"
    ])

    // The next push is a push: created.yml and manual.yml stay out.
    const second = buildCommit({ branch: "feature", files: { ...FILES, "README.md": "more\n" }, parent: first })
    const again = await as().post("/tess/app/push", pushBody({ branch: "feature", commits: [second], expectedHead: first.commit.hash }))
    expect(again.body.success, JSON.stringify(again.body)).toBe(true)
    expect(await runsAt(second.commit.hash, 4)).toEqual(["both push", "every push", "onpush push", "pushstring push"])
    // And the first push's runs are still exactly one per workflow.
    expect(await runsAt(first.commit.hash, 5)).toHaveLength(5)
  }, 120_000)

  it("a merge runs the merge workflows at the squash commit: one the merge itself adds, then as the folder changes", async () => {
    expect((await as().post("/repos", { name: "flow" })).status).toBe(201)
    let main: { head: string | null; files: Record<string, string> } = { head: null, files: {} }
    /** Branch `name` off main with `files` changed, merged: the squash commit's hash. */
    const mergeIn = async (name: string, files: Record<string, string>) => {
      const all = { ...main.files, ...files }
      const built = buildCommit({ branch: name, files: all, parentHash: main.head, parentSnapshot: buildCommit({ branch: "main", files: main.files }).snapshot })
      const pushed = await as().post("/tess/flow/push", pushBody({ branch: name, commits: [built] }))
      expect(pushed.body.success, JSON.stringify(pushed.body)).toBe(true)
      const merged = await as().post(`/tess/flow/branches/${name}/merge?force=1`)
      expect(merged.status, JSON.stringify(merged.body)).toBe(200)
      main = { head: merged.body.commit_hash, files: all }
      return merged.body.commit_hash as string
    }
    // No workflow on main yet: nothing runs.
    await mergeIn("start", { "README.md": "hello\n" })
    // The merge that adds the workflow runs it.
    const added = await mergeIn("add-ci", { ".oak/workflows/onmerge.yml": workflow("[merge]"), ".oak/workflows/onpush.yml": workflow("[push]") })
    expect(await runsAt(added, 1, "flow")).toEqual(["onmerge merge"])
    // A merge that leaves the workflows as they are (another root tree, the same folder) runs them too.
    const readme = await mergeIn("readme", { "README.md": "more\n" })
    expect(await runsAt(readme, 1, "flow")).toEqual(["onmerge merge"])
    // A changed folder is read again: the second merge workflow runs, the push one now on merge too.
    const more = await mergeIn("more-ci", { ".oak/workflows/second.yml": workflow("merge"), ".oak/workflows/onpush.yml": workflow("[push, merge]") })
    expect(await runsAt(more, 3, "flow")).toEqual(["onmerge merge", "onpush merge", "second merge"])
  }, 120_000)
})
