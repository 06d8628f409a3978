import * as fs from "node:fs"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import * as path from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Stream } from "effect"
import { encodeCommit, encodeTree, objectId, packObjectHeader } from "./GitObjects.ts"
import { buildPack } from "./GitPack.ts"
import type { GitPackResult } from "./GitPack.ts"
import { ADVERTISEMENT_CONTENT_TYPE, advertiseRefs, errorPacket, parseUploadRequest, RESULT_CONTENT_TYPE, uploadPack } from "./GitSmartHttp.ts"
import type { UploadRequest } from "./GitSmartHttp.ts"
import { MemorySnapshotSource } from "./MemorySnapshotSource.ts"
import { makeTestHistory } from "./TestSnapshot.ts"
import { run, tempDir } from "./TestTools.ts"

/** A node:http server for `/o/r.git` serving whatever pack `state` holds, closed with the scope. */
const serve = (state: { current: GitPackResult | undefined; readonly requests?: Array<UploadRequest> }) =>
  Effect.acquireRelease(
    Effect.promise(() =>
      new Promise<http.Server>((resolve) => {
        const server = http.createServer((req, res) => {
          const url = new URL(req.url ?? "/", "http://localhost")
          const pack = state.current
          if (req.method === "GET" && url.pathname === "/o/r.git/info/refs" && url.searchParams.get("service") === "git-upload-pack") {
            res.writeHead(200, { "content-type": ADVERTISEMENT_CONTENT_TYPE, "cache-control": "no-cache" })
            res.end(advertiseRefs(pack?.headSha ?? null))
            return
          }
          if (req.method === "POST" && url.pathname === "/o/r.git/git-upload-pack" && pack !== undefined) {
            const body: Array<Buffer> = []
            req.on("data", (c: Buffer) => body.push(c))
            req.on("end", () => {
              Effect.runPromise(parseUploadRequest(Buffer.concat(body))).then((r) => state.requests?.push(r), () => undefined)
              const program = uploadPack(Buffer.concat(body), pack.headSha, { path: pack.packPath }).pipe(
                Effect.flatMap((stream) =>
                  Effect.gen(function*() {
                    res.writeHead(200, { "content-type": RESULT_CONTENT_TYPE })
                    yield* Stream.runForEach(stream, (chunk) =>
                      Effect.promise(() => new Promise<void>((done) => res.write(chunk) ? done() : res.once("drain", done))))
                    res.end()
                  })
                ),
                Effect.catchTag("UploadPackRequestError", (e) =>
                  Effect.sync(() => {
                    res.writeHead(200, { "content-type": RESULT_CONTENT_TYPE })
                    res.end(errorPacket(e.message))
                  }))
              )
              Effect.runPromise(program).catch(() => res.destroy())
            })
            return
          }
          res.writeHead(404).end()
        })
        server.listen(0, "127.0.0.1", () => resolve(server))
      })
    ),
    (server) => Effect.promise(() => new Promise<void>((done) => server.close(() => done())))
  ).pipe(Effect.map((server) => `http://127.0.0.1:${(server.address() as AddressInfo).port}/o/r.git`))

describe("GitObjects", () => {
  it("matches git's own ids and encodings", () => {
    // `git hash-object -t tree /dev/null` and `echo hi | git hash-object --stdin`
    assert.strictEqual(objectId("tree", encodeTree([])), "4b825dc642cb6eb9a060e54bf8d69288fbee4904")
    assert.strictEqual(objectId("blob", Buffer.from("hi\n")), "45b983be36b73c0788dc9cbcb76cbb80fc7bb057")
    assert.deepStrictEqual([...packObjectHeader("blob", 15)], [0x3f])
    assert.deepStrictEqual([...packObjectHeader("commit", 16)], [0x90, 0x01])
    const commit = Buffer.from(encodeCommit({ tree: "t", parent: null, author: "a<b>", timestamp: "1970-01-01T00:00:10Z", message: null })).toString()
    assert.strictEqual(commit, "tree t\nauthor ab <ab@grove> 10 +0000\ncommitter ab <ab@grove> 10 +0000\n\nSquash commit\n")
  })
})

describe("git export", () => {
  it.live("clones with the stock git client: files, modes, history, fsck; fetches a new head", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const { source, history, files, subjects } = makeTestHistory()
      const first = yield* buildPack(source, history.slice(0, 2), path.join(dir, "first.pack"))
      const full = yield* buildPack(source, history, path.join(dir, "full.pack"))
      // 3 commits; v1: 4 trees (root, src, lib, bin), 5 blobs; v2: 5 trees (root, 日本語, a, a/b, a/b/c), 7 blobs;
      // v3: root and README. Unchanged subtrees (src, bin) are written once.
      assert.strictEqual(full.objectCount, 3 + 4 + 5 + 5 + 7 + 2)
      const requests: Array<UploadRequest> = []
      const state = { current: first as GitPackResult | undefined, requests }
      const url = yield* serve(state)

      const clone = path.join(dir, "clone")
      yield* run("git", ["clone", "-q", url, clone], { cwd: dir })
      assert.strictEqual((yield* run("git", ["rev-parse", "HEAD"], { cwd: clone })).trim(), first.headSha)
      assert.strictEqual((yield* run("git", ["log", "--format=%s"], { cwd: clone })), `${subjects.slice(1).join("\n")}\n`)

      state.current = full
      requests.length = 0
      yield* run("git", ["pull", "-q", "--ff-only"], { cwd: clone })
      // the fetch told us what it has, was answered NAK, and still got a pack it could use
      assert.isTrue(requests.some((r) => r.haves.includes(first.headSha!)))
      assert.isTrue(requests.some((r) => r.done && r.capabilities.includes("side-band-64k")))
      assert.strictEqual((yield* run("git", ["rev-parse", "HEAD", "origin/main"], { cwd: clone })), `${full.headSha}\n${full.headSha}\n`)
      assert.strictEqual((yield* run("git", ["log", "--format=%s"], { cwd: clone })), `${subjects.join("\n")}\n`)
      assert.strictEqual(
        yield* run("git", ["log", "-1", "--skip=1", "--format=%an <%ae> %at %cn"], { cwd: clone }),
        "Zoë Writer <Zoë-Writer@grove> 1782390600 Zoë Writer\n"
      )
      yield* run("git", ["fsck", "--strict", "--full", "--no-dangling"], { cwd: clone })

      const fresh = path.join(dir, "fresh")
      yield* run("git", ["-c", "protocol.version=0", "clone", "-q", url, fresh], { cwd: dir })
      const staged = (yield* run("git", ["-c", "core.quotePath=false", "ls-files", "-s"], { cwd: fresh })).trim().split("\n")
      const modes = new Map(staged.map((line) => {
        const [meta, name] = line.split("\t") as [string, string]
        return [name, meta.split(" ")[0]]
      }))
      assert.strictEqual(modes.size, files.size)
      for (const [name, file] of files) {
        assert.strictEqual(modes.get(name), { regular: "100644", executable: "100755", symlink: "120000" }[file.mode], name)
        const target = path.join(fresh, name)
        if (file.mode === "symlink") {
          assert.strictEqual(yield* Effect.promise(() => fs.promises.readlink(target)), Buffer.from(file.content).toString())
        } else {
          const bytes = yield* Effect.promise(() => fs.promises.readFile(target))
          assert.isTrue(Buffer.from(file.content).equals(bytes), name)
          const stat = yield* Effect.promise(() => fs.promises.stat(target))
          assert.strictEqual(stat.mode & 0o100, file.mode === "executable" ? 0o100 : 0, name)
        }
      }
      yield* run("git", ["fsck", "--strict", "--full", "--no-dangling"], { cwd: fresh })
      assert.strictEqual((yield* run("git", ["status", "--porcelain"], { cwd: fresh })), "")
    }).pipe(Effect.scoped))

  it.live("builds the same pack twice, and git's index-pack accepts it as is", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const { source, history } = makeTestHistory()
      const a = yield* buildPack(source, history, path.join(dir, "a.pack"))
      const b = yield* buildPack(source, history, path.join(dir, "b.pack"))
      const bytes = (p: string) => Effect.promise(() => fs.promises.readFile(p))
      assert.isTrue((yield* bytes(a.packPath)).equals(yield* bytes(b.packPath)))
      yield* run("git", ["init", "-q", "--bare", "repo.git"], { cwd: dir })
      const verify = yield* run("git", ["index-pack", "--strict", "-o", path.join(dir, "a.idx"), a.packPath], { cwd: path.join(dir, "repo.git") })
      assert.strictEqual(verify.trim(), Buffer.from((yield* bytes(a.packPath)).subarray(-20)).toString("hex"))
    }).pipe(Effect.scoped))

  it.live("keeps an empty directory as git's empty tree, which fsck accepts and checkout skips", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const source = new MemorySnapshotSource()
      const tree = source.addTree({ empty: { dir: {} }, "f.txt": { file: "f\n" } })
      const history = [{ hash: "e".repeat(64), parent_hash: null, manifest_hash: tree, author: "a", message: "m", timestamp: "2026-01-01T00:00:00Z" }]
      const pack = yield* buildPack(source, history, path.join(dir, "e.pack"))
      const url = yield* serve({ current: pack })
      yield* run("git", ["clone", "-q", url, "c"], { cwd: dir })
      yield* run("git", ["fsck", "--strict", "--full", "--no-dangling"], { cwd: path.join(dir, "c") })
      assert.strictEqual(yield* run("git", ["ls-tree", "HEAD"], { cwd: path.join(dir, "c") }),
        "040000 tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904\tempty\n100644 blob 6a69f92020f5df77af6e8813ff1232493383b708\tf.txt\n")
    }).pipe(Effect.scoped))

  it.live("refuses wants other than the head, and answers an empty repository with capabilities only", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const empty = Buffer.from(advertiseRefs(null)).toString()
      assert.include(empty, "0000000000000000000000000000000000000000 capabilities^{}\0")
      const { source, history } = makeTestHistory()
      const pack = yield* buildPack(source, history.slice(0, 1), path.join(dir, "p.pack"))
      const want = (id: string) => Buffer.from(`0032want ${id}\n00000009done\n`)
      const error = yield* Effect.flip(uploadPack(want("1".repeat(40)), pack.headSha, { path: pack.packPath }))
      assert.strictEqual(error._tag, "UploadPackRequestError")
      const junk = yield* Effect.flip(uploadPack(Buffer.from("zzzz"), pack.headSha, { path: pack.packPath }))
      assert.strictEqual(junk._tag, "UploadPackRequestError")
      // without side-band: NAK, then the raw pack
      const answer = yield* uploadPack(want(pack.headSha!), pack.headSha, { path: pack.packPath }).pipe(
        Effect.flatMap((s) => Stream.runCollect(s))
      )
      const bytes = Buffer.concat([...answer])
      assert.strictEqual(bytes.subarray(0, 12).toString(), "0008NAK\nPACK")
      assert.isTrue(bytes.subarray(8).equals(yield* Effect.promise(() => fs.promises.readFile(pack.packPath))))
    }).pipe(Effect.scoped))
})
