/**
 * `GET /api/{owner}/{name}/branches/{branch}/merge-preview`: what merging would do, written nowhere:
 * the merge base, clean or conflicting (with the paths), no changes, not mergeable (with why), the
 * branch's commits and the files it changes; 404 to whoever may not see the repository or for a branch
 * that does not exist; and main does not move.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { buildCommit, pushBody } from "../support/content.ts"
import { type GroveServer, startServer } from "../support/GroveServer.ts"
import { api } from "../support/http.ts"

let server: GroveServer
let pam: string
let stranger: string

beforeAll(async () => {
  server = await startServer()
  pam = await server.createUser("pam")
  stranger = await server.createUser("sid")
  expect((await api(server.url, pam).post("/repos", { name: "app" })).status).toBe(201)
}, 300_000)

afterAll(async () => {
  await server?.stop()
})

const as = () => api(server.url, pam)
/** As pam, or as `token` (null: anonymous). */
const preview = (branch: string, token: string | null = pam) => api(server.url, token ?? undefined).get(`/pam/app/branches/${encodeURIComponent(branch)}/merge-preview`)
const push = async (branch: string, commit: ReturnType<typeof buildCommit>, description?: string) => {
  const reply = await as().post("/pam/app/push", pushBody({ branch, commits: [commit], ...(description === undefined ? {} : { description }) }))
  expect(reply.body, JSON.stringify(reply.body)).toMatchObject({ success: true })
}

describe("merge preview", () => {
  it("clean, conflicts, no changes and not mergeable, with commits and files, and main never moves", async () => {
    const first = buildCommit({ branch: "first", files: { "x.txt": "one\n", "keep.txt": "k\n" } })
    await push("first", first, "First")
    const clean = await preview("first")
    expect(clean.status, JSON.stringify(clean.body)).toBe(200)
    expect(clean.body).toMatchObject({
      branch: "first", head: first.commit.hash, main_head: null, merge_base: null, merge: "clean", conflict_paths: [], ci: { state: "none", workflows: [] }
    })
    expect(clean.body.commits).toEqual([expect.objectContaining({ hash: first.commit.hash, author: "tester", files: 2 })])
    expect(clean.body.files.map((f: { path: string; change_type: string }) => [f.path, f.change_type])).toEqual([["keep.txt", "added"], ["x.txt", "added"]])
    expect((await as().get("/pam/app")).body.head).toBeNull()
    const merged = await as().post("/pam/app/branches/first/merge")
    expect(merged.status).toBe(200)
    const mainHead: string = merged.body.commit_hash

    // Two branches off the new main change x.txt differently; once one lands, the other conflicts.
    const base = { parentHash: mainHead, parentSnapshot: first.snapshot }
    const left = buildCommit({ branch: "left", files: { "x.txt": "left\n", "keep.txt": "k\n" }, ...base })
    const right = buildCommit({ branch: "right", files: { "x.txt": "right\n", "keep.txt": "k\n", "new.txt": "n\n" }, ...base })
    await push("left", left)
    await push("right", right)
    const before = await preview("right")
    expect(before.body).toMatchObject({ merge: "clean", merge_base: mainHead, main_head: mainHead })
    expect(before.body.files.map((f: { path: string; change_type: string }) => [f.path, f.change_type])).toEqual([["new.txt", "added"], ["x.txt", "modified"]])
    expect((await as().post("/pam/app/branches/left/merge")).status).toBe(200)
    const after = await preview("right")
    expect(after.body).toMatchObject({ merge: "conflicts", conflict_paths: ["x.txt"], merge_base: mainHead })

    // A merged branch: not mergeable, and why.
    expect((await preview("left")).body).toMatchObject({ merge: "not_mergeable", reason: "branch 'left' was already merged" })
    // A branch that changes nothing main lacks.
    const same = buildCommit({ branch: "same", files: { "x.txt": "one\n", "keep.txt": "k\n" }, parentHash: mainHead, parentSnapshot: first.snapshot })
    await push("same", same)
    expect((await preview("same")).body).toMatchObject({ merge: "no_changes" })

    // Who may not see the repository, and what does not exist.
    expect((await preview("right", stranger)).status).toBe(404)
    expect((await preview("right", null)).status).toBe(404)
    expect((await preview("nope")).status).toBe(404)
    // Previews wrote nothing on main.
    const head = (await as().get("/pam/app")).body.head
    expect((await as().get("/pam/app/branches/main")).body.head).toBe(head)
  }, 120_000)
})
