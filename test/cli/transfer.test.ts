/**
 * What the real `grove` binary puts on the wire, seen through a recording
 * proxy in front of the real server: a first push sends compressible chunks
 * zstd-compressed and incompressible ones raw (and a clone gets the same bytes
 * back, asking for compressed frames only when told to: the server is on
 * loopback here); a push after touching nothing, or after only touching mtimes, sends
 * nothing; a push after one changed byte in one file among many sends that
 * file's chunk alone. A connection lost as a push or a chunk batch went out is
 * sent again, and the push lands once; so is a pull, a chunk batch or a chunks/fetch that a draining node answered 503.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Objects } from "@grove/core"
import * as fs from "node:fs"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import * as path from "node:path"
import { zstdCompressSync, zstdDecompressSync } from "node:zlib"
import { decodeBatch, noise } from "../support/content.ts"
import type { GroveServer } from "../support/GroveServer.ts"
import { type Recorded, type RecordingProxy, startRecordingProxy } from "../support/RecordingProxy.ts"
import { at, grove, type GroveOptions, json, listing, ok, startSuiteServer, stopSuiteServers, tempDir } from "./harness.ts"

let server: GroveServer
let proxy: RecordingProxy
let tess: GroveOptions

beforeAll(async () => {
  server = await startSuiteServer()
  proxy = await startRecordingProxy(server.url)
  tess = { home: tempDir("tess"), env: { SERVICE_API_KEY: await server.createUser("tess"), GROVE_REMOTE: proxy.url } }
}, 300_000)

afterAll(async () => {
  await proxy?.close()
  await stopSuiteServers()
})

const ZSTD_MAGIC = Buffer.from([0x28, 0xb5, 0x2f, 0xfd])

/** The frames of a body of bare frames (`chunk_frames: bare_v1`), each with the hash of its plain bytes. */
const bareFrames = async (body: Uint8Array) => {
  const out: Array<{ hash: string; data: Uint8Array; zstd: boolean }> = []
  for await (const frame of Objects.Frames.decodeBareFrames((async function*() {
    yield body
  })())) {
    out.push({ ...frame, hash: Objects.Blake3.hash(Objects.ChunkCompression.bareFramePlain(frame, 64 * 1024 * 1024)) })
  }
  return out
}

/** A batch's frames as sent: a whole batch may go zstd (body_compression), its frames inside. */
const batchFrames = (r: Recorded): Buffer => r.requestHeaders["content-encoding"] === "zstd" ? zstdDecompressSync(r.body) : r.body

/** The chunk frames of every `chunks/batch` upload among `records` (bare frames say so by their content type). */
const uploadedFrames = async (records: ReadonlyArray<Recorded>) => {
  const frames: Array<{ hash: string; data: Uint8Array; zstd?: boolean }> = []
  for (const r of records.filter((x) => x.method === "POST" && x.path.endsWith("/chunks/batch"))) {
    if (r.requestHeaders["content-type"] === Objects.Frames.BARE_CONTENT_TYPE) frames.push(...await bareFrames(batchFrames(r)))
    else frames.push(...await decodeBatch(batchFrames(r)))
  }
  return frames
}

/** Source-like text, different in every file (and checkout: the organization dedups), that zstd shrinks well. */
const text = (name: string, i: number, size: number) => {
  let out = ""
  for (let line = 0; out.length < size; line++) out += `export const ${name}_${i}_${line} = compute("file ${i}", ${line}) // keep ${line % 7}\n`
  return out.slice(0, size)
}

/** Writes `files` (path -> bytes) under `root`; answers path -> bytes. */
const writeTree = (root: string, files: Record<string, string | Uint8Array>) => {
  for (const [file, bytes] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(root, file)), { recursive: true })
    fs.writeFileSync(path.join(root, file), bytes)
  }
  return files
}

/** A pushed checkout of `count` text files (about 4 KiB each) and a few incompressible ones. */
/**
 * A proxy in front of the server that holds the answer of the request `held` picks until a request `awaited` picks
 * arrives (or 20 s: a client that sends it only after that answer), and notes the order (names as given).
 */
const holdingUntil = async (
  held: { readonly name: string; readonly is: (req: http.IncomingMessage) => boolean },
  awaited: { readonly name: string; readonly is: (req: http.IncomingMessage) => boolean }
) => {
  const target = new URL(proxy.url)
  let release = () => {}
  const arrived = new Promise<void>((resolve) => (release = resolve))
  const order: Array<string> = []
  const holding = await interceptingProxy(proxy.url, (req, res, body) => {
    if (awaited.is(req)) {
      order.push(awaited.name)
      release()
      return false
    }
    if (!held.is(req)) return false
    const forward = http.request({ hostname: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers }, (answer) => {
      const pieces: Array<Buffer> = []
      answer.on("data", (d: Buffer) => pieces.push(d))
      answer.on("end", () => {
        void Promise.race([arrived, new Promise((resolve) => setTimeout(resolve, 20_000))]).then(() => {
          order.push(held.name)
          res.writeHead(answer.statusCode ?? 502, answer.rawHeaders)
          res.end(Buffer.concat(pieces))
        })
      })
    })
    forward.on("error", () => res.destroy())
    forward.end(body)
    return true
  })
  return { holding, order }
}

const pushedCheckout = async (name: string, count: number, env: Record<string, string> = {}) => {
  const work = tempDir(name)
  const files: Record<string, string | Uint8Array> = {}
  for (let i = 0; i < count; i++) files[`src/d${i % 8}/file${i}.ts`] = text(name, i, 3000 + (i % 5) * 500)
  for (let i = 0; i < 4; i++) files[`assets/blob${i}.bin`] = noise(20_000 + i * 3000, [...name].reduce((a, c) => (a * 31 + c.charCodeAt(0)) >>> 0, 7) + i)
  writeTree(work, files)
  await ok(["init", "--name", name, "--json"], at(tess, work))
  await ok(["commit", "--json"], at(tess, work))
  proxy.take()
  const pushed = json(await ok(["push", "--json"], { ...at(tess, work), env: { ...tess.env, ...env } }))
  return { work, files, pushed, records: proxy.take() }
}

describe("grove transfers on the wire", () => {
  it("a first push sends each batch's plain frames as one zstd body; without zstd bodies, compressible chunks zstd one by one and incompressible ones raw; a clone gets the same bytes", async () => {
    const { files, pushed, records, work } = await pushedCheckout("squeeze", 120)
    // The client asked whether the server takes compressed chunks before sending any.
    expect(records.some((r) => r.method === "GET" && r.path === "/api/capabilities")).toBe(true)
    const byHash = new Map(Object.entries(files).map(([file, bytes]) => [Objects.Blake3.hash(bytes), { file, bytes: Buffer.from(bytes) }]))
    // The server advertises bare frames and zstd bodies: every batch went as one zstd body of bare frames, each
    // frame the chunk's plain bytes (no frame zstd on its own), 4 bytes of header a chunk.
    const batches = records.filter((r) => r.path.endsWith("/chunks/batch"))
    expect(batches.map((r) => [r.requestHeaders["content-type"], r.requestHeaders["content-encoding"]]))
      .toEqual(batches.map(() => [Objects.Frames.BARE_CONTENT_TYPE, "zstd"]))
    const frames = await uploadedFrames(records)
    expect(new Set(frames.map((f) => f.hash))).toEqual(new Set(byHash.keys()))
    let plain = 0
    for (const frame of frames) {
      const { bytes, file } = byHash.get(frame.hash)!
      expect({ file, zstd: frame.zstd, plain: Buffer.from(frame.data).equals(bytes) }).toEqual({ file, zstd: false, plain: true })
      plain += bytes.length
    }
    expect(batches.reduce((sum, r) => sum + batchFrames(r).length, 0)).toBe(plain + 4 * frames.length)
    expect(pushed).toMatchObject({ pushed_commits: 1, uploaded_chunks: frames.length, uploaded_bytes: plain })
    expect(pushed.sent_bytes).toBe(batches.reduce((sum, r) => sum + r.body.length, 0))
    expect(pushed.sent_bytes).toBeLessThan(plain / 2)
    // Every file is small: no blobs/check, and the push lists no blob (each is its uploaded chunk).
    expect(records.filter((r) => r.path.endsWith("/blobs/check"))).toEqual([])
    // The push's JSON (and every other body of 16 KiB or more) went zstd: the server advertises body_compression.
    const push = records.find((r) => r.method === "POST" && r.path.endsWith("/push"))!
    expect(push.body.subarray(0, 4).equals(ZSTD_MAGIC)).toBe(true)
    expect(JSON.parse(zstdDecompressSync(push.body).toString())).toMatchObject({ blobs: [], commits: [expect.anything()] })
    expect(JSON.parse(zstdDecompressSync(push.body).toString()).commits.at(-1).hash).toBe(pushed.head)

    // Without zstd bodies (GROVE_BODY_COMPRESSION=off, or a server that does not take them): each chunk on its own,
    // zstd when that shrinks it, raw when not; the batch body itself plain. More bytes than one stream a batch.
    const each = await pushedCheckout("squeeze-each", 120, { GROVE_BODY_COMPRESSION: "off" })
    const eachBatches = each.records.filter((r) => r.path.endsWith("/chunks/batch"))
    expect(eachBatches.map((r) => [r.requestHeaders["content-type"], r.requestHeaders["content-encoding"]]))
      .toEqual(eachBatches.map(() => [Objects.Frames.BARE_CONTENT_TYPE, undefined]))
    const eachHashes = new Map(Object.entries(each.files).map(([file, bytes]) => [Objects.Blake3.hash(bytes), { file, bytes: Buffer.from(bytes) }]))
    const eachFrames = await uploadedFrames(each.records)
    expect(new Set(eachFrames.map((f) => f.hash))).toEqual(new Set(eachHashes.keys()))
    let eachPlain = 0
    let eachSent = 0
    for (const frame of eachFrames) {
      const { bytes, file } = eachHashes.get(frame.hash)!
      const data = Buffer.from(frame.data)
      eachPlain += bytes.length
      eachSent += data.length
      if (file.endsWith(".bin")) {
        expect({ file, raw: data.equals(bytes) }).toEqual({ file, raw: true })
      } else {
        expect({ file, zstd: data.subarray(0, 4).equals(ZSTD_MAGIC), smaller: data.length < bytes.length / 2 }).toEqual({ file, zstd: true, smaller: true })
        expect(zstdDecompressSync(data).equals(bytes)).toBe(true)
      }
    }
    expect(each.pushed).toMatchObject({ pushed_commits: 1, uploaded_chunks: eachFrames.length, uploaded_bytes: eachPlain })
    expect(each.pushed.sent_bytes).toBe(eachSent + 4 * eachFrames.length)
    expect(each.pushed.sent_bytes).toBeLessThan(eachPlain / 2)
    expect(pushed.sent_bytes).toBeLessThan(each.pushed.sent_bytes)

    // The server stored the plain bytes: a clone gets every file back. On loopback it does not ask for
    // compressed frames (there the bytes cost nothing); asked, as a client elsewhere does, they come compressed.
    for (const mode of ["auto", "on"] as const) {
      const copy = path.join(tempDir(`squeeze-${mode}`), "copy")
      await ok(["clone", "tess/squeeze", copy, "--branch", pushed.branch, "--json"], { ...tess, env: { ...tess.env, GROVE_CHUNK_COMPRESSION: mode } })
      expect(listing(copy)).toEqual(listing(work))
      const fetches = proxy.take().filter((r) => r.path.endsWith("/chunks/fetch"))
      expect(fetches.length).toBeGreaterThan(0)
      for (const r of fetches) {
        expect({ mode, asked: JSON.parse(r.body.toString()).compression }).toEqual({ mode, asked: mode === "on" ? "zstd_v1" : undefined })
        expect({ mode, header: r.responseHeaders[Objects.ChunkCompression.RESPONSE_HEADER] }).toEqual({ mode, header: mode === "on" ? "zstd_v1" : undefined })
        // Bare frames asked for and given.
        expect({ mode, asked: JSON.parse(r.body.toString()).frames, given: r.responseHeaders[Objects.Frames.HEADER] })
          .toEqual({ mode, asked: "bare_v1", given: "bare_v1" })
      }
    }
    // Hashed frames still work both ways (GROVE_CHUNK_FRAMES=hashed: what an older server gets).
    const hashedEnv = { ...tess.env, GROVE_CHUNK_FRAMES: "hashed", GROVE_CHUNK_COMPRESSION: "on" }
    const copy = path.join(tempDir("squeeze-hashed"), "copy")
    await ok(["clone", "tess/squeeze", copy, "--branch", pushed.branch, "--json"], { ...tess, env: hashedEnv })
    expect(listing(copy)).toEqual(listing(work))
    const fetched = proxy.take().filter((r) => r.path.endsWith("/chunks/fetch"))
    expect(fetched.map((r) => r.responseHeaders[Objects.Frames.HEADER])).toEqual(fetched.map(() => undefined))
    fs.writeFileSync(path.join(copy, "added.ts"), text("hashed", 1, 400_000))
    await ok(["commit", "--json"], { ...tess, cwd: copy, env: hashedEnv })
    await ok(["push", "--json"], { ...tess, cwd: copy, env: hashedEnv })
    const hashedBatches = proxy.take().filter((r) => r.path.endsWith("/chunks/batch"))
    expect(hashedBatches.map((r) => r.requestHeaders["content-type"])).toEqual(["application/octet-stream"])
    expect((await uploadedFrames(hashedBatches)).map((f) => f.hash)).toEqual([Objects.Blake3.hash(text("hashed", 1, 400_000))])
  }, 180_000)

  it("a push after touching nothing, or only mtimes, sends nothing; after one changed byte in one file among many, only that file's chunk", async () => {
    const { files, records, work } = await pushedCheckout("steady", 300)
    expect((await uploadedFrames(records)).length).toBe(Object.keys(files).length)

    const noop = json(await ok(["push", "--json"], at(tess, work)))
    expect(noop).toMatchObject({ pushed_commits: 0, uploaded_chunks: 0, sent_bytes: 0 })
    expect(proxy.take().map((r) => `${r.method} ${r.path}`)).toEqual([])

    // Every file's mtime moves (a build tool, a checkout of the same branch): each is hashed again, nothing sent.
    const earlier = new Date(Date.now() - 3_600_000)
    for (const file of Object.keys(files)) fs.utimesSync(path.join(work, file), earlier, earlier)
    expect(json(await ok(["push", "--json"], at(tess, work)))).toMatchObject({ pushed_commits: 0, uploaded_chunks: 0 })
    expect(proxy.take().map((r) => `${r.method} ${r.path}`)).toEqual([])

    // One byte of one file, its size unchanged.
    const target = "src/d5/file157.ts"
    const bytes = Buffer.from(files[target] as string)
    bytes[1000] = bytes[1000] === 0x41 ? 0x42 : 0x41
    fs.writeFileSync(path.join(work, target), bytes)
    const changed = json(await ok(["push", "--json"], at(tess, work)))
    expect(changed).toMatchObject({ pushed_commits: 1, uploaded_chunks: 1, uploaded_bytes: bytes.length })
    const sent = proxy.take()
    const frames = await uploadedFrames(sent)
    expect(frames.map((f) => f.hash)).toEqual([Objects.Blake3.hash(bytes)])
    // Raw or compressed (a 4 KiB push is not worth asking the server's capabilities), the bytes are that file's.
    const plain = Objects.ChunkCompression.plainChunkBytes(frames[0]!.hash, frames[0]!.data, bytes.length)
    expect(plain !== undefined && Buffer.from(plain).equals(bytes)).toBe(true)
    // A small file is its own one chunk: sent without asking (no blobs/check, and no chunks/check for 64 KiB or
    // less in all: sync/Upload.ts), and not listed in the push (the server registers it from the uploaded chunk):
    // two requests.
    expect(sent.map((r) => `${r.method} ${r.path.replace("/api/tess/steady/", "")}`)).toEqual(["POST chunks/batch", "POST push"])
    const push = JSON.parse(sent.find((r) => r.path.endsWith("/push"))!.body.toString())
    expect(push.blobs).toEqual([])
    expect(push.commits.map((c: { files: Array<{ path: string; change_type: string }> }) => c.files)).toEqual([
      [expect.objectContaining({ path: target, change_type: "modified" })]
    ])
  }, 240_000)
})

/**
 * In front of `upstream`: every request is read whole, then `intercept` may answer it (true) or it passes through.
 * `seen` lists every request as "METHOD url".
 */
const interceptingProxy = async (
  upstream: string,
  intercept: (req: http.IncomingMessage, res: http.ServerResponse, body: Buffer) => boolean
) => {
  const target = new URL(upstream)
  const seen: Array<string> = []
  const server = http.createServer((req, res) => {
    const pieces: Array<Buffer> = []
    req.on("data", (d: Buffer) => pieces.push(d))
    req.on("end", () => {
      seen.push(`${req.method} ${req.url}`)
      if (intercept(req, res, Buffer.concat(pieces))) return
      const forward = http.request({ hostname: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers }, (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.rawHeaders)
        answer.pipe(res)
      })
      forward.on("error", () => res.destroy())
      forward.end(Buffer.concat(pieces))
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    seen,
    close: () => new Promise<void>((resolve) => (server.close(() => resolve()), server.closeAllConnections()))
  }
}

/**
 * In front of `upstream`: the first request matching each of `drops` is read whole and its connection
 * closed without an answer, as when a server closes an idle keep-alive socket just as the request goes
 * out (the client sees EPIPE / "other side closed" before any byte of an answer); the rest pass through.
 */
const droppingProxy = async (upstream: string, drops: ReadonlyArray<(method: string, url: string) => boolean>) => {
  const pending = [...drops]
  const proxy = await interceptingProxy(upstream, (req) => {
    const drop = pending.findIndex((matches) => matches(req.method ?? "", req.url ?? ""))
    if (drop < 0) return false
    pending.splice(drop, 1)
    req.socket.destroy()
    return true
  })
  return { ...proxy, dropsLeft: () => pending.length }
}

/**
 * In front of `upstream`: the first request matching each of `refusals` is answered 503 `draining` with
 * `retry-after: 0`, as a node that is being stopped does (it did not act on it); the rest pass through.
 */
const drainingProxy = async (upstream: string, refusals: ReadonlyArray<(method: string, url: string) => boolean>) => {
  const pending = [...refusals]
  const proxy = await interceptingProxy(upstream, (req, res) => {
    const refuse = pending.findIndex((matches) => matches(req.method ?? "", req.url ?? ""))
    if (refuse < 0) return false
    pending.splice(refuse, 1)
    res.writeHead(503, { "content-type": "application/json", "retry-after": "0" })
    res.end(JSON.stringify({ error: "draining", code: "unavailable", retryable: true }))
    return true
  })
  return { ...proxy, refusalsLeft: () => pending.length }
}

/**
 * In front of `upstream`: the first `times` `chunks/fetch` answers pass `cutAt` bytes of their body, then their
 * connection is closed (a flaky network); the rest pass through. `sent` is the part of the first body that went out.
 */
const cuttingProxy = async (upstream: string, cutAt: number, times = 1) => {
  const target = new URL(upstream)
  let sent: Buffer | undefined
  let cuts = 0
  const proxy = await interceptingProxy(upstream, (req, res, body) => {
    if (cuts >= times || !(req.method === "POST" && req.url?.endsWith("/chunks/fetch") === true)) return false
    cuts++
    const pieces: Array<Buffer> = []
    let count = 0
    const forward = http.request({ hostname: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.rawHeaders)
      answer.on("data", (d: Buffer) => {
        if (count >= cutAt) return
        const piece = d.subarray(0, cutAt - count)
        count += piece.length
        pieces.push(piece)
        if (count < cutAt) return void res.write(piece)
        sent ??= Buffer.concat(pieces)
        res.write(piece, () => res.socket?.destroy())
      })
    })
    forward.on("error", () => res.destroy())
    forward.end(body)
    return true
  })
  return { ...proxy, sent: () => sent ?? Buffer.alloc(0) }
}

/** The hashes of the bare frames wholly within `body`, and how many bytes of it they take. */
const wholeFrames = (body: Buffer) => {
  const hashes: Array<string> = []
  let at = 0
  while (body.length - at >= 4) {
    const word = body.readUInt32BE(at)
    const length = word & 0x7fff_ffff
    if (body.length - at - 4 < length) break
    const frame = { data: body.subarray(at + 4, at + 4 + length), zstd: word >= 0x8000_0000 }
    hashes.push(Objects.Blake3.hash(Objects.ChunkCompression.bareFramePlain(frame, 64 * 1024 * 1024)))
    at += 4 + length
  }
  return { hashes, bytes: at }
}

describe("grove transfers over lost connections", () => {
  it("a clone whose chunks/fetch answer breaks part-way asks again for only the chunks it did not take, in order; the tree is right", async () => {
    const { pushed, work } = await pushedCheckout("cut", 60)
    const cut = await cuttingProxy(proxy.url, 100_000)
    try {
      const copy = path.join(tempDir("cut-clone"), "c")
      await ok(["clone", "tess/cut", copy, "--branch", pushed.branch, "--json"], {
        ...tess,
        env: { ...tess.env, GROVE_REMOTE: cut.url }
      })
      expect(listing(copy)).toEqual(listing(work))
      const fetches = proxy.take().filter((r) => r.path.endsWith("/chunks/fetch"))
      expect(cut.seen.filter((line) => line.endsWith("/chunks/fetch"))).toHaveLength(2)
      expect(fetches).toHaveLength(2)
      const [first, second] = fetches.map((r) => JSON.parse(r.body.toString()).hashes as Array<string>)
      // The cut fell inside a frame, after some whole ones: those were taken, the half one was asked again.
      const taken = wholeFrames(cut.sent())
      expect(cut.sent().length).toBe(100_000)
      expect(taken.hashes.length).toBeGreaterThan(0)
      expect(taken.bytes).toBeLessThan(100_000)
      expect(second).toEqual(first!.filter((hash) => !taken.hashes.includes(hash)))
      expect(second!.length).toBeGreaterThan(0)
      // A network that keeps cutting: the same five tries as any request, then the clone fails.
      const flaky = await cuttingProxy(proxy.url, 1_000, Infinity)
      try {
        const lost = await grove(["clone", "tess/cut", path.join(tempDir("cut-flaky"), "c"), "--branch", pushed.branch, "--json"], {
          ...tess,
          env: { ...tess.env, GROVE_REMOTE: flaky.url }
        })
        expect(lost.code).not.toBe(0)
        expect(lost.stdout + lost.stderr).toMatch(/the connection broke within the server's answer/)
        expect(flaky.seen.filter((line) => line.endsWith("/chunks/fetch"))).toHaveLength(5)
      } finally {
        await flaky.close()
      }
    } finally {
      await cut.close()
    }
  }, 180_000)

  it("a chunk that fails its hash part-way through an answer fails the clone at once: nothing is asked again", async () => {
    const { pushed } = await pushedCheckout("spoilt", 20)
    let spoilt = 0
    const target = new URL(proxy.url)
    const spoiling = await interceptingProxy(proxy.url, (req, res, body) => {
      if (!(req.method === "POST" && req.url?.endsWith("/chunks/fetch") === true)) return false
      spoilt++
      const forward = http.request({ hostname: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers }, (answer) => {
        const pieces: Array<Buffer> = []
        answer.on("data", (d: Buffer) => pieces.push(d))
        answer.on("end", () => {
          const whole = Buffer.concat(pieces)
          whole[whole.length - 10] = whole[whole.length - 10]! ^ 0xff // inside the last frame
          res.writeHead(answer.statusCode ?? 502, answer.rawHeaders)
          res.end(whole)
        })
      })
      forward.on("error", () => res.destroy())
      forward.end(body)
      return true
    })
    try {
      const copy = path.join(tempDir("spoilt-clone"), "c")
      const run = await grove(["clone", "tess/spoilt", copy, "--branch", pushed.branch, "--json"], {
        ...tess,
        env: { ...tess.env, GROVE_REMOTE: spoiling.url }
      })
      expect(run.code).not.toBe(0)
      // Corruption, told as such: the bytes named no chunk asked for (a bare frame carries no hash).
      expect(run.stdout + run.stderr).toMatch(/download failed: the server sent corrupt bytes: a chunk of its answer hashes to [0-9a-f]{64}, which is none of the chunks asked for/)
      expect(spoilt).toBe(1)
      // The history was being written while the files downloaded: the failed clone leaves nothing behind.
      expect(fs.existsSync(copy)).toBe(false)
    } finally {
      await spoiling.close()
    }
  }, 180_000)

  it("a clone pulls and downloads without waiting for its key: held back until the files are asked for, the key is still stored and works", async () => {
    const { files, pushed } = await pushedCheckout("keyless-wait", 12)
    // The key's answer is held until the first chunks/fetch arrives (or 20 s: a client that waits for its key).
    const { holding, order } = await holdingUntil(
      { name: "api-keys answered", is: (req) => req.method === "POST" && req.url === "/api/api-keys" },
      { name: "chunks/fetch", is: (req) => req.method === "POST" && req.url?.endsWith("/chunks/fetch") === true }
    )
    try {
      const copy = path.join(tempDir("keyless-clone"), "c")
      const cloned = json(await ok(["clone", "tess/keyless-wait", copy, "--branch", pushed.branch, "--json"], { ...tess, env: { ...tess.env, GROVE_REMOTE: holding.url } }))
      expect(order).toEqual(["chunks/fetch", "api-keys answered"])
      expect(cloned).toMatchObject({ key_stored: true, files: Object.keys(files).length })
      for (const [file, bytes] of Object.entries(files)) expect(Buffer.from(fs.readFileSync(path.join(copy, file))).equals(Buffer.from(bytes))).toBe(true)
      // The stored key works on its own (no SERVICE_API_KEY).
      const key = JSON.parse(fs.readFileSync(path.join(copy, ".grove", "config.json"), "utf8")).key
      expect(key).toMatch(/^grove_/)
      const status = await grove(["pull", "--json"], { ...at(tess, copy), env: { GROVE_REMOTE: proxy.url } })
      expect(status.code).toBe(0)
    } finally {
      await holding.close()
    }
  }, 180_000)

  it("a clone asks who its caller is while the repository is looked up, not after", async () => {
    const { files, pushed } = await pushedCheckout("whoami-along", 4)
    // The repository's answer is held until whoami arrives (or 20 s: a client that asks it only after).
    const { holding, order } = await holdingUntil(
      { name: "repository answered", is: (req) => req.method === "GET" && req.url === "/api/tess/whoami-along" },
      { name: "whoami", is: (req) => req.url === "/api/whoami" }
    )
    try {
      const copy = path.join(tempDir("whoami-along-clone"), "c")
      const cloned = json(await ok(["clone", "tess/whoami-along", copy, "--branch", pushed.branch, "--json"], { ...tess, env: { ...tess.env, GROVE_REMOTE: holding.url } }))
      expect(order).toEqual(["whoami", "repository answered"])
      expect(cloned).toMatchObject({ files: Object.keys(files).length })
    } finally {
      await holding.close()
    }
  }, 180_000)

  it("a clone whose key is refused while its files download stops the download and fails at once, leaving no folder", async () => {
    const { pushed } = await pushedCheckout("key-refused", 12)
    let release = () => {}
    const fetched = new Promise<void>((resolve) => (release = resolve))
    const order: Array<string> = []
    const target = new URL(proxy.url)
    // The files' first request is held (until the client gives it up, or 30 s); the key is refused once it is held.
    const holding = await interceptingProxy(proxy.url, (req, res, body) => {
      if (req.method === "POST" && req.url?.endsWith("/chunks/fetch") === true) {
        order.push("chunks/fetch held")
        release()
        let answered = false
        res.on("close", () => {
          if (!answered) order.push("chunks/fetch given up")
        })
        setTimeout(() => {
          if (res.destroyed) return
          answered = true
          order.push("chunks/fetch released")
          const forward = http.request({ hostname: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers }, (answer) => {
            res.writeHead(answer.statusCode ?? 502, answer.rawHeaders)
            answer.pipe(res)
          })
          forward.on("error", () => res.destroy())
          forward.end(body)
        }, 30_000).unref()
        return true
      }
      if (!(req.method === "POST" && req.url === "/api/api-keys")) return false
      void Promise.race([fetched, new Promise((resolve) => setTimeout(resolve, 20_000))]).then(() => {
        order.push("api-keys refused")
        res.writeHead(403, { "content-type": "application/json" })
        res.end(JSON.stringify({ error: "no keys for this test", code: "forbidden" }))
      })
      return true
    })
    try {
      const copy = path.join(tempDir("key-refused-clone"), "c")
      const failed = await grove(["clone", "tess/key-refused", copy, "--branch", pushed.branch], { ...tess, env: { ...tess.env, GROVE_REMOTE: holding.url } })
      // The clone failed while its files' request was still held: it did not wait for the download.
      expect(order.slice(0, 2)).toEqual(["chunks/fetch held", "api-keys refused"])
      expect(order).not.toContain("chunks/fetch released")
      expect(failed.code).not.toBe(0)
      expect(failed.stderr).toContain("no keys for this test")
      expect(fs.existsSync(copy)).toBe(false)
    } finally {
      await holding.close()
    }
  }, 180_000)

  it("a push and a chunk batch whose connection is lost as they go out are sent again; the push lands once", async () => {
    const isPush = (method: string, url: string) => method === "POST" && url === "/api/tess/lossy/push"
    const isBatch = (method: string, url: string) => method === "POST" && url.endsWith("/chunks/batch")
    // Through the recording proxy: it sees what reached the server.
    const lossy = await droppingProxy(proxy.url, [isPush, isBatch])
    try {
      const work = tempDir("lossy")
      const files = writeTree(work, { "a.txt": text("lossy", 1, 5000), "b/c.txt": text("lossy", 2, 7000) })
      const options = { ...at(tess, work), env: { ...tess.env, GROVE_REMOTE: lossy.url } }
      await ok(["init", "--name", "lossy", "--json"], options)
      proxy.take()
      const pushed = json(await ok(["push", "--json"], options))
      expect(pushed).toMatchObject({ pushed_commits: 1, uploaded_chunks: Object.keys(files).length })
      expect(lossy.dropsLeft()).toBe(0)
      // Each was sent twice; the server saw the push once and published its commit.
      expect(lossy.seen.filter((line) => isPush(...(line.split(" ") as [string, string])))).toHaveLength(2)
      expect(lossy.seen.filter((line) => isBatch(...(line.split(" ") as [string, string])))).toHaveLength(2)
      const reached = proxy.take()
      expect(reached.filter((r) => isPush(r.method, r.path)).map((r) => r.status)).toEqual([200])
      expect(json(await ok(["push", "--json"], options))).toMatchObject({ pushed_commits: 0, head: pushed.head })
      const clone = path.join(tempDir("lossy-clone"), "c")
      await ok(["clone", "tess/lossy", clone, "--branch", pushed.branch, "--json"], at(tess, work))
      for (const [file, bytes] of Object.entries(files)) expect(fs.readFileSync(path.join(clone, file), "utf8")).toBe(bytes)
    } finally {
      await lossy.close()
    }
  }, 180_000)

  it("a pull, a chunks/fetch and a chunk batch answered 503 (a draining node, Retry-After 0) are sent again: the push and the clone succeed", async () => {
    const isBatch = (method: string, url: string) => method === "POST" && url.endsWith("/chunks/batch")
    const isPull = (method: string, url: string) => method === "GET" && url.startsWith("/api/tess/drained/pull?")
    const isFetch = (method: string, url: string) => method === "POST" && url.endsWith("/chunks/fetch")
    const drained = await drainingProxy(proxy.url, [isBatch, isPull, isFetch])
    try {
      const work = tempDir("drained")
      const files = writeTree(work, { "a.txt": text("drained", 1, 5000), "b/c.txt": text("drained", 2, 7000) })
      const options = { ...at(tess, work), env: { ...tess.env, GROVE_REMOTE: drained.url } }
      await ok(["init", "--name", "drained", "--json"], options)
      const pushed = json(await ok(["push", "--json"], options))
      expect(pushed).toMatchObject({ pushed_commits: 1, uploaded_chunks: Object.keys(files).length })
      const clone = path.join(tempDir("drained-clone"), "c")
      await ok(["clone", "tess/drained", clone, "--branch", pushed.branch, "--json"], options)
      expect(drained.refusalsLeft()).toBe(0)
      for (const matches of [isBatch, isPull, isFetch]) expect(drained.seen.filter((line) => matches(...(line.split(" ") as [string, string])))).toHaveLength(2)
      for (const [file, bytes] of Object.entries(files)) expect(fs.readFileSync(path.join(clone, file), "utf8")).toBe(bytes)
    } finally {
      await drained.close()
    }
  }, 180_000)
})

describe("grove transfers with bare frames", () => {
  it("plain bytes that begin with the zstd magic are stored as they are: a push with bare frames and a clone give them back byte for byte", async () => {
    const work = tempDir("magic")
    const zstdStream = zstdCompressSync(noise(300_000, 41)) // a real .zst file: incompressible, valid zstd
    const files = writeTree(work, {
      "archive.tar.zst": zstdStream,
      // Begins with the magic, then text: the client sends it zstd-compressed, and its plain bytes still begin with the magic.
      "magic.txt": Buffer.concat([ZSTD_MAGIC, Buffer.from(text("magic", 1, 20_000))]),
      "not-zstd.bin": Buffer.concat([ZSTD_MAGIC, noise(5000, 42)])
    })
    await ok(["init", "--name", "magic", "--json"], at(tess, work))
    proxy.take()
    const pushed = json(await ok(["push", "--json"], at(tess, work)))
    const records = proxy.take()
    const batches = records.filter((r) => r.path.endsWith("/chunks/batch"))
    expect(batches.length).toBeGreaterThan(0)
    expect(batches.map((r) => r.requestHeaders["content-type"])).toEqual(batches.map(() => Objects.Frames.BARE_CONTENT_TYPE))
    const sent = new Map((await bareFrames(Buffer.concat(batches.map((r) => r.body)))).map((f) => [f.hash, f.zstd]))
    expect(sent).toEqual(new Map([
      [Objects.Blake3.hash(files["archive.tar.zst"]!), false],
      [Objects.Blake3.hash(files["magic.txt"]!), true],
      [Objects.Blake3.hash(files["not-zstd.bin"]!), false]
    ]))
    const copy = path.join(tempDir("magic-clone"), "c")
    await ok(["clone", "tess/magic", copy, "--branch", pushed.branch, "--json"], at(tess, work))
    expect(listing(copy)).toEqual(listing(work))
    for (const [file, bytes] of Object.entries(files)) expect(fs.readFileSync(path.join(copy, file)).equals(Buffer.from(bytes))).toBe(true)
  }, 180_000)

  it("a node that does not know bare frames (400 invalid_batch or invalid_chunk) gets the batch again as hashed frames, and every later one; the clone is byte for byte", async () => {
    const isBare = (req: http.IncomingMessage) => req.headers["content-type"] === Objects.Frames.BARE_CONTENT_TYPE
    // An older node: it reads a bare body as hashed frames and rejects it, mostly as a bad frame, but as a chunk
    // whose hash does not match when the first bytes happen to parse as one frame (the first refusal here).
    let refused = 0
    const old = await interceptingProxy(proxy.url, (req, res) => {
      if (!(req.method === "POST" && req.url?.endsWith("/chunks/batch") === true && isBare(req))) return false
      res.writeHead(400, { "content-type": "application/json" })
      res.end(JSON.stringify(refused++ === 0
        ? { error: "chunk 2f736f75726365 does not match its content", code: "invalid_chunk" }
        : { error: "invalid batch: bad frame: hash length 3221225472", code: "invalid_batch" }))
      return true
    })
    try {
      const work = tempDir("upgrade")
      const files: Record<string, string> = {}
      // Six batches of at most 256 chunks, three in flight: the ones after the first answer go hashed at once.
      for (let i = 0; i < 1400; i++) files[`src/d${i % 16}/f${i}.ts`] = text("upgrade", i, 300 + (i % 7) * 20)
      writeTree(work, files)
      const options = { ...at(tess, work), env: { ...tess.env, GROVE_REMOTE: old.url } }
      await ok(["init", "--name", "upgrade", "--json"], options)
      proxy.take()
      const pushed = json(await ok(["push", "--json"], options))
      const batches = old.seen.filter((line) => line.startsWith("POST ") && line.endsWith("/chunks/batch"))
      const reached = proxy.take().filter((r) => r.path.endsWith("/chunks/batch"))
      expect(reached.length).toBeGreaterThanOrEqual(6)
      expect(reached.map((r) => [r.status, r.requestHeaders["content-type"]])).toEqual(reached.map(() => [200, "application/octet-stream"]))
      // At most the batches in flight when the first answer came went bare (3); each of those went again.
      expect(batches.length - reached.length).toBeGreaterThanOrEqual(1)
      expect(batches.length - reached.length).toBeLessThanOrEqual(3)
      expect(pushed).toMatchObject({ pushed_commits: 1 })
      const copy = path.join(tempDir("upgrade-clone"), "c")
      await ok(["clone", "tess/upgrade", copy, "--branch", pushed.branch, "--json"], at(tess, work))
      expect(listing(copy)).toEqual(listing(work))
    } finally {
      await old.close()
    }
  }, 180_000)
})

describe("grove transfers to a node busy decoding zstd bodies", () => {
  it("a zstd chunk batch answered 503 busy (other pushers fill the decode budget) goes again per chunk at once, never as zstd again; the push and clone succeed", async () => {
    const isZstdBatch = (req: http.IncomingMessage) =>
      req.method === "POST" && req.url?.endsWith("/chunks/batch") === true && req.headers["content-encoding"] === "zstd"
    // The server's own answer when DECODE_BUDGET is full (BodyLimits.decodeBusy): here for every zstd batch.
    let busy = 0
    const full = await interceptingProxy(proxy.url, (req, res) => {
      if (!isZstdBatch(req)) return false
      busy++
      res.writeHead(503, { "content-type": "application/json", "retry-after": "1" })
      res.end(JSON.stringify({ error: "too many compressed request bodies are being decoded: retry shortly", code: "unavailable", retryable: true }))
      return true
    })
    try {
      const work = tempDir("busy")
      const files: Record<string, string> = {}
      // Three batches of at most 256 chunks, all compressible text: each would go as one zstd body.
      for (let i = 0; i < 600; i++) files[`src/d${i % 16}/f${i}.ts`] = text("busy", i, 2000 + (i % 7) * 100)
      writeTree(work, files)
      const options = { ...at(tess, work), env: { ...tess.env, GROVE_REMOTE: full.url } }
      await ok(["init", "--name", "busy", "--json"], options)
      proxy.take()
      const pushed = json(await ok(["push", "--json"], options))
      expect(pushed).toMatchObject({ pushed_commits: 1, uploaded_chunks: 600 })
      const reached = proxy.take().filter((r) => r.path.endsWith("/chunks/batch"))
      expect(reached.length).toBeGreaterThanOrEqual(3)
      // Each batch went as zstd once (no wait and no second zstd try), then per chunk: frames zstd on their own.
      expect(busy).toBe(reached.length)
      expect(reached.map((r) => [r.status, r.requestHeaders["content-encoding"]])).toEqual(reached.map(() => [200, undefined]))
      const frames = (await Promise.all(reached.map((r) => bareFrames(r.body)))).flat()
      expect(frames.length).toBe(600)
      expect(frames.every((f) => f.zstd)).toBe(true)
      const copy = path.join(tempDir("busy-clone"), "c")
      await ok(["clone", "tess/busy", copy, "--branch", pushed.branch, "--json"], at(tess, work))
      expect(listing(copy)).toEqual(listing(work))
    } finally {
      await full.close()
    }
  }, 180_000)
})
