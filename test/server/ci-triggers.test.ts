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

/** The runs at `commit`, once `count` of them are there, as `workflow event` sorted. */
const runsAt = (commit: string, count: number) =>
  waitFor(`${count} runs at ${commit.slice(0, 12)}`, async () => {
    const runs: Array<{ workflow_name: string; event: string; commit_hash: string }> = (await as().get("/tess/app/ci/runs")).body
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
})
