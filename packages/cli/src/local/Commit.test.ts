import { describe, expect, it } from "@effect/vitest"
import { Merge, Objects } from "@grove/core"
import { Effect } from "effect"
import * as fs from "node:fs/promises"
import * as path from "node:path"
import { tempDir } from "../../test/support.ts"
import { commitSnapshot, commitWorkingTree } from "./Commit.ts"
import { blobPath } from "./Objects.ts"
import { currentBranch, initialState, newBranch } from "./State.ts"
import { EMPTY_INDEX } from "./TreeStatus.ts"
import { readIndex, scan, writeIndex } from "./WorkingTree.ts"
import { openAt, saveState, writeConfig } from "./Workspace.ts"

const setup = Effect.gen(function*() {
  const root = yield* tempDir("commit")
  const workspace = yield* writeConfig(root, { remote: "http://127.0.0.1:9", name: "demo" })
  const state = initialState("tester", newBranch("tester-abcdef"))
  yield* saveState(workspace, state)
  return { root, workspace, state }
})

const write = (root: string, file: string, text: string) =>
  Effect.promise(async () => {
    await fs.mkdir(path.dirname(path.join(root, file)), { recursive: true })
    await fs.writeFile(path.join(root, file), text)
  })

describe("Commit", () => {
  it.effect("commits the working tree: valid hashes, file changes, kept blob copies, unpushed list", () =>
    Effect.gen(function*() {
      const { root, state, workspace } = yield* setup
      yield* write(root, "a.txt", "alpha\n")
      yield* write(root, "dir/b.txt", "beta\n")
      const first = yield* commitWorkingTree(workspace, state)
      const c1 = first.commit!
      expect(Objects.Commit.checkCommit({ ...c1, parent_hash: null }).ok).toBe(true)
      expect(c1).toMatchObject({ branch_name: "tester-abcdef", author: "tester", parent_hash: null })
      expect(c1.timestamp).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{3}|\.\d{6})?\+00:00$/)
      expect(c1.files.map((f) => [f.path, f.change_type])).toEqual([["a.txt", "added"], ["dir/b.txt", "added"]])
      // The pushed bytes are the committed ones, whatever happens to the file afterwards.
      yield* write(root, "a.txt", "changed later\n")
      const kept = yield* Effect.promise(() => fs.readFile(blobPath(root, Objects.Blake3.hash("alpha\n")), "utf8"))
      expect(kept).toBe("alpha\n")

      const second = yield* commitWorkingTree(workspace, first.state)
      expect(second.commit?.parent_hash).toBe(c1.hash)
      expect(second.changes.map((c) => c.change_type)).toEqual(["modified"])
      expect(currentBranch(second.state)).toMatchObject({ head: second.commit!.hash, unpushed: [c1.hash, second.commit!.hash] })
      const files = yield* commitSnapshot(workspace, second.commit!.hash)
      expect(files.get("a.txt")?.hash).toBe(Objects.Blake3.hash("changed later\n"))
      expect(files.get("dir/b.txt")?.hash).toBe(Objects.Blake3.hash("beta\n"))

      const nothing = yield* commitWorkingTree(workspace, second.state)
      expect(nothing.commit).toBeUndefined()
    }).pipe(Effect.scoped))

  it.effect("a tracked .grove path (an older client's) blocks the commit, naming it, until it is moved out", () =>
    Effect.gen(function*() {
      const { root, state, workspace } = yield* setup
      yield* write(root, "a.txt", "alpha\n")
      yield* write(root, "d/g/x", "kept\n")
      const first = yield* commitWorkingTree(workspace, state)
      // As an older client left it: the file under d/.grove, and the index tracking it there.
      yield* Effect.promise(() => fs.rename(path.join(root, "d/g"), path.join(root, "d/.grove")))
      const index = yield* readIndex(root)
      const entry = index.files.get("d/g/x")!
      yield* writeIndex(root, new Map([["a.txt", index.files.get("a.txt")!], ["d/.grove/x", entry]]), null)
      const refused = yield* Effect.flip(commitWorkingTree(workspace, first.state))
      expect(refused.code).toBe("invalid_path")
      expect(refused.message).toContain("d/.grove/x: tracked, but 'd/.grove' is taken for '.grove'")
      expect(refused.message).toContain("move it out of 'd/.grove'")
      // Moved out: the commit lands, the file at its new path.
      yield* Effect.promise(() => fs.rename(path.join(root, "d/.grove/x"), path.join(root, "d/x")))
      const moved = yield* commitWorkingTree(workspace, first.state)
      expect([...(yield* commitSnapshot(workspace, moved.commit!.hash)).keys()].sort()).toEqual(["a.txt", "d/x"])
    }).pipe(Effect.scoped))

  it.effect("the index holds the head: no tree is read, only changed directories are rebuilt, same manifest as a full build", () =>
    Effect.gen(function*() {
      const { root, state, workspace } = yield* setup
      for (const dir of ["x", "y/z", "w"]) yield* write(root, `${dir}/f.txt`, dir)
      const first = yield* commitWorkingTree(workspace, state)
      // The head's trees are not needed any more: the index records the head's files and directory hashes.
      yield* Effect.promise(() => fs.rm(path.join(root, ".grove/objects/trees"), { recursive: true }))
      const fresh = openAt(root, workspace.config) // no trees cached in memory either
      expect((yield* commitWorkingTree(fresh, first.state)).commit).toBeUndefined()
      yield* write(root, "y/z/f.txt", "changed")
      const second = yield* commitWorkingTree(openAt(root, workspace.config), first.state)
      const manifest = Merge.Snapshots.buildTrees((yield* scan(root, EMPTY_INDEX)).snapshot)
      expect(manifest.ok && manifest.root).toBe(second.commit!.manifest_hash)
      expect(second.changes.map((c) => c.path)).toEqual(["y/z/f.txt"])
      const stored = yield* fresh.objects.readCommit(second.commit!.hash)
      expect(stored?.new_trees).toHaveLength(3) // y/z, y and the root
    }).pipe(Effect.scoped))

  it.effect("a merge in progress: markers block the commit; resolved, it gets both parents", () =>
    Effect.gen(function*() {
      const { root, state, workspace } = yield* setup
      yield* write(root, "n.txt", "one\n")
      const base = yield* commitWorkingTree(workspace, state)
      const merging = {
        ...base.state,
        merge: { branch: "tester-abcdef", parent: base.commit!.hash, merge_parent: base.commit!.hash, conflicts: ["n.txt"] }
      }
      yield* write(root, "n.txt", "<<<<<<< ours\none\n=======\ntwo\n>>>>>>> theirs\n")
      const blocked = yield* Effect.flip(commitWorkingTree(workspace, merging))
      expect(blocked.code).toBe("unresolved_conflicts")
      yield* write(root, "n.txt", "one and two\n")
      const done = yield* commitWorkingTree(workspace, merging)
      expect(done.commit?.merge_parent_hash).toBe(base.commit!.hash)
      expect(done.state.merge).toBeUndefined()
    }).pipe(Effect.scoped))
})
