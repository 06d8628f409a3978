/**
 * zstd request and response bodies (`body_compression: zstd_v1`, http/ContentEncoding.ts) against the
 * real server: a compressed push lands the same commit a plain one does, a compressed chunk batch is
 * stored, a large JSON answer comes compressed only to a caller that accepts it; a zstd bomb stops at
 * the route's limit with 413 (small route, the push, and a body sent without a length), bytes that are
 * not zstd answer 400, and plain requests (the Oak client, older clients) are untouched. Concurrent bombs
 * leave the server's memory where it was (decoding stops at 64x the compressed size).
 */
import * as Blake3 from "@grove/core/objects/Blake3"
import * as Frames from "@grove/core/objects/Frames"
import * as fs from "node:fs"
import * as http from "node:http"
import * as net from "node:net"
import { constants, zstdCompressSync, zstdDecompressSync } from "node:zlib"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { batchBody, buildCommit, decodeBatch, noise, pushBody } from "../support/content.ts"
import { type GroveServer, startServer } from "../support/GroveServer.ts"
import { api, isErrorBody } from "../support/http.ts"

let server: GroveServer
let token: string

beforeAll(async () => {
  server = await startServer()
  token = await server.createUser("zoe")
}, 300_000)

afterAll(async () => {
  await server?.stop()
})

const zstd = (value: unknown) => zstdCompressSync(Buffer.from(typeof value === "string" ? value : JSON.stringify(value)))

/** A zstd stream of `frames` frames of 64 MiB of zeros each (a few KiB on the wire): made without holding the plain bytes. */
const bomb = (frames: number) => {
  const zeros = Buffer.alloc(64 * 1024 * 1024)
  const frame = zstdCompressSync(zeros, { params: { [constants.ZSTD_c_compressionLevel]: 19 } })
  return Buffer.concat(Array.from({ length: frames }, () => frame))
}

interface Answer {
  readonly status: number
  readonly headers: http.IncomingHttpHeaders
  readonly body: Buffer
}

/**
 * A request through node:http (fetch would hide the answer's encoding): `chunked` sends the body without a length.
 * Each on a fresh connection: a pooled keep-alive socket the server closed while this process's event loop was held
 * (compressing a 1 GiB bomb takes seconds at load) is still in the pool until its close is read, and reused it fails
 * the request with "socket hang up".
 */
const send = (method: string, path: string, body: Buffer | undefined, headers: Record<string, string>, chunked = false) =>
  new Promise<Answer>((resolve, reject) => {
    const url = new URL(`${server.url}/api${path}`)
    const request = http.request({
      agent: false,
      host: url.hostname,
      port: url.port,
      method,
      path: url.pathname + url.search,
      headers: {
        authorization: `Bearer ${token}`,
        ...(body !== undefined && !chunked ? { "content-length": String(body.length) } : {}),
        ...headers
      }
    }, (response) => {
      const parts: Array<Buffer> = []
      response.on("data", (d: Buffer) => parts.push(d))
      response.on("end", () => resolve({ status: response.statusCode ?? 0, headers: response.headers, body: Buffer.concat(parts) }))
      response.on("error", reject)
    })
    // The server may answer (413) and close before it has read the whole body.
    request.on("error", reject)
    if (body !== undefined && chunked) {
      for (let i = 0; i < body.length; i += 16 * 1024) request.write(body.subarray(i, i + 16 * 1024))
      request.end()
    } else request.end(body)
  })

const jsonOf = (answer: Answer): any => JSON.parse((answer.headers["content-encoding"] === "zstd" ? zstdDecompressSync(answer.body) : answer.body).toString())

const ZSTD_JSON = { "content-type": "application/json", "content-encoding": "zstd" }

const newRepo = async (name: string) => {
  const created = await api(server.url, token).post("/repos", { name })
  expect(created.status).toBe(201)
}

/** Many small files: a push body of a few hundred KiB. */
const manyFiles = (tag: string, count: number) =>
  Object.fromEntries(Array.from({ length: count }, (_, i) => [`src/d${i % 9}/f${i}.ts`, `export const ${tag}${i} = ${i * 7919}\n`]))

describe("zstd request bodies", () => {
  it("the server advertises body_compression; a compressed push lands the commit a plain push does, and the pull comes compressed when accepted", async () => {
    const caps = await api(server.url, token).get("/capabilities")
    expect(caps.body).toMatchObject({ body_compression: "zstd_v1", chunk_compression: "zstd_v1" })

    await newRepo("squash")
    const c = buildCommit({ branch: "feature", files: manyFiles("sq", 400) })
    const body = Buffer.from(JSON.stringify(pushBody({ branch: "feature", commits: [c] })))
    const compressed = zstd(body.toString())
    expect(compressed.length).toBeLessThan(body.length / 3)
    const pushed = await send("POST", "/zoe/squash/push", compressed, ZSTD_JSON)
    expect({ status: pushed.status, body: jsonOf(pushed) }).toEqual({ status: 200, body: { success: true, new_head: c.commit.hash, message: "ok" } })

    // The same push plain into another repository: the same head (the commit hash covers every tree and blob).
    await newRepo("plain")
    const plain = await send("POST", "/zoe/plain/push", body, { "content-type": "application/json" })
    expect({ status: plain.status, body: jsonOf(plain) }).toEqual({ status: 200, body: { success: true, new_head: c.commit.hash, message: "ok" } })

    // A pull asked with Accept-Encoding: zstd comes compressed and says so; without it, plain; the same JSON.
    const zipped = await send("GET", "/zoe/squash/pull?branch_name=feature", undefined, { "accept-encoding": "gzip, zstd" })
    const unzipped = await send("GET", "/zoe/squash/pull?branch_name=feature", undefined, {})
    expect(zipped.status).toBe(200)
    expect(zipped.headers["content-encoding"]).toBe("zstd")
    expect(zipped.headers["vary"]).toMatch(/accept-encoding/i)
    expect(unzipped.headers["content-encoding"]).toBeUndefined()
    expect(zipped.body.length).toBeLessThan(unzipped.body.length / 2)
    expect(jsonOf(zipped)).toEqual(jsonOf(unzipped))
    expect(jsonOf(zipped).head).toBe(c.commit.hash)
    // The binary download takes a compressed hash list too (its files' chunks), and answers their frames.
    const contents = [...c.contents]
    const fetched = await send("POST", "/zoe/squash/chunks/fetch", zstd({ hashes: contents.map(([h]) => h) }), ZSTD_JSON)
    expect(fetched.status).toBe(200)
    expect((await decodeBatch(fetched.body)).map((f) => Buffer.from(f.data).toString())).toEqual(contents.map(([, bytes]) => Buffer.from(bytes).toString()))
    // q=0 refuses it.
    expect((await send("GET", "/zoe/squash/pull?branch_name=feature", undefined, { "accept-encoding": "zstd;q=0" })).headers["content-encoding"]).toBeUndefined()
  }, 120_000)

  it("a compressed hash check (with a length, and without one) answers as a plain one; a compressed chunk batch is stored", async () => {
    await newRepo("checks")
    const data = Array.from({ length: 40 }, (_, i) => Buffer.from(`chunk number ${i}\n`.repeat(50)))
    const hashes = data.map((d) => Blake3.hash(d))
    const plain = await send("POST", "/zoe/checks/blobs/check", Buffer.from(JSON.stringify({ hashes })), { "content-type": "application/json" })
    expect(jsonOf(plain)).toEqual({ missing: hashes })
    for (const chunked of [false, true]) {
      const answer = await send("POST", "/zoe/checks/blobs/check", zstd({ hashes }), ZSTD_JSON, chunked)
      expect({ chunked, status: answer.status, body: jsonOf(answer) }).toEqual({ chunked, status: 200, body: { missing: hashes } })
    }
    const frames = batchBody(data.map((d, i) => ({ hash: hashes[i]!, data: d })))
    const batch = await send("POST", "/zoe/checks/chunks/batch", zstdCompressSync(frames), { "content-type": "application/octet-stream", "content-encoding": "zstd" })
    expect({ status: batch.status, body: jsonOf(batch) }).toEqual({ status: 200, body: { ok: true, received: 40 } })
    const check = await send("POST", "/zoe/checks/chunks/check", zstd({ hashes }), ZSTD_JSON)
    expect(jsonOf(check)).toEqual({ missing: [] })
  }, 120_000)

  it("a chunk batch of plain bare frames in one zstd body stores the bytes per-chunk zstd and plain frames store; bad zstd answers 400 invalid_batch", async () => {
    // Three organizations (each user's own: the dedup boundary), so each form stores every chunk itself.
    const users = [["zoe", token], ["wendy", await server.createUser("wendy")], ["xavi", await server.createUser("xavi")]] as const
    for (const [, key] of users) {
      expect((await api(server.url, key).post("/repos", { name: "forms" })).status).toBe(201)
    }
    const chunks = [
      ...Array.from({ length: 30 }, (_, i) => Buffer.from(`export const form${i} = ${i * 31} // shared words across chunks\n`.repeat(20 + i))),
      noise(20_000, 5),
      // Plain bytes that begin with the zstd magic (and are no zstd frame).
      Buffer.concat([Buffer.from([0x28, 0xb5, 0x2f, 0xfd]), noise(3_000, 6)])
    ]
    const hashes = chunks.map((d) => Blake3.hash(d))
    const bare = (frames: ReadonlyArray<{ data: Uint8Array; zstd: boolean }>) => Buffer.concat(Frames.encodeBareFrames(frames))
    // Each request on its own connection: an idle keep-alive socket left in the pool is closed by the server's idle
    // timeout, and a later test's request that takes it as that happens fails with "socket hang up".
    const BARE = { "content-type": Frames.BARE_CONTENT_TYPE, connection: "close" }
    const perChunk = chunks.map((d) => {
      const z = zstdCompressSync(d)
      return z.length < d.length ? { data: z, zstd: true } : { data: d, zstd: false }
    })
    const wholeBody = zstdCompressSync(bare(chunks.map((d) => ({ data: d, zstd: false }))))
    const forms = [
      ["zstd body of plain bare frames", wholeBody, { ...BARE, "content-encoding": "zstd" }],
      ["bare frames, zstd per chunk", bare(perChunk), BARE],
      ["plain hashed frames", Buffer.from(batchBody(chunks.map((d, i) => ({ hash: hashes[i]!, data: d })))), { "content-type": "application/octet-stream", connection: "close" }]
    ] as const
    expect(wholeBody.length).toBeLessThan(bare(perChunk).length)
    const stored: Array<Array<string>> = []
    for (const [i, [form, body, headers]] of forms.entries()) {
      const [user, key] = users[i]!
      const answer = await send("POST", `/${user}/forms/chunks/batch`, body, { ...headers, authorization: `Bearer ${key}` })
      expect({ form, status: answer.status, body: jsonOf(answer) }).toEqual({ form, status: 200, body: { ok: true, received: chunks.length } })
      // Files made of the uploaded chunks (a small blob is its chunk), pushed without inline content; then what the
      // server holds, read back as plain hashed frames.
      const c = buildCommit({ branch: "forms", files: Object.fromEntries(chunks.map((d, j) => [`f${j}.bin`, d])) })
      const pushed = await send("POST", `/${user}/forms/push`, Buffer.from(JSON.stringify(pushBody({ branch: "forms", commits: [c], blobs: [] }))), {
        "content-type": "application/json",
        connection: "close",
        authorization: `Bearer ${key}`
      })
      expect({ form, body: jsonOf(pushed) }).toEqual({ form, body: { success: true, new_head: c.commit.hash, message: "ok" } })
      const fetched = await send("POST", `/${user}/forms/chunks/fetch`, Buffer.from(JSON.stringify({ hashes })), { "content-type": "application/json", connection: "close", authorization: `Bearer ${key}` })
      expect({ form, status: fetched.status }).toEqual({ form, status: 200 })
      const frames = await decodeBatch(fetched.body)
      expect({ form, hashes: frames.map((f) => f.hash) }).toEqual({ form, hashes })
      stored.push(frames.map((f) => Buffer.from(f.data).toString("base64")))
    }
    expect(stored[0]).toEqual(chunks.map((d) => d.toString("base64")))
    expect(stored[1]).toEqual(stored[0])
    expect(stored[2]).toEqual(stored[0])

    // Bodies that say zstd and are not (garbage; a frame cut short; plain frames; bytes after the frame: node's decoder
    // took the first frame alone, 200 received 1): 400 invalid_batch, nothing stored.
    await newRepo("badzstd")
    const other = [Buffer.from("not a batch that has anything to do with the chunks"), noise(300_000, 7)]
    const firstFrame = zstdCompressSync(bare([{ data: other[0]!, zstd: false }]))
    for (const [what, body] of [
      ["garbage", Buffer.from("not zstd at all, not frames either")],
      ["truncated", wholeBody.subarray(0, wholeBody.length - 7)],
      ["plain frames", bare(other.map((d) => ({ data: d, zstd: false })))],
      ["two frames", Buffer.concat([firstFrame, zstdCompressSync(bare([{ data: other[1]!, zstd: false }]))])],
      ["a frame and junk", Buffer.concat([firstFrame, Buffer.from("junk after the frame")])]
    ] as const) {
      const answer = await send("POST", "/zoe/badzstd/chunks/batch", body, { ...BARE, "content-encoding": "zstd" })
      const error = JSON.parse(answer.body.toString())
      expect({ what, status: answer.status, code: error.code, error: isErrorBody(error) }).toEqual({ what, status: 400, code: "invalid_batch", error: true })
      expect(error.error).toMatch(/zstd/)
    }
    const otherHashes = other.map((d) => Blake3.hash(d))
    const check = await send("POST", "/zoe/badzstd/chunks/check", Buffer.from(JSON.stringify({ hashes: otherHashes })), { "content-type": "application/json", connection: "close" })
    expect(jsonOf(check).missing.map((m: { hash: string }) => m.hash)).toEqual(otherHashes)
    // A JSON route alike: a second frame or junk after the body's frame is refused, not dropped.
    const json = zstd({ hashes: otherHashes })
    for (const [what, body] of [["two frames", Buffer.concat([json, zstd("{}")])], ["a frame and junk", Buffer.concat([json, Buffer.from("junk")])]] as const) {
      const answer = await send("POST", "/zoe/badzstd/chunks/check", body, { ...ZSTD_JSON, connection: "close" })
      expect({ what, status: answer.status, error: isErrorBody(JSON.parse(answer.body.toString())) }).toEqual({ what, status: 400, error: true })
    }
  }, 180_000)

  it("a zstd bomb answers 413 at the route's limit (1 MiB route, the 256 MiB push, chunk batch and fetch, a body without a length); bytes that are not zstd answer 400", async () => {
    await newRepo("bombed")
    const small = bomb(1) // 64 MiB of zeros
    expect(small.length).toBeLessThan(64 * 1024)
    for (const chunked of [false, true]) {
      const answer = await send("POST", "/zoe/bombed/blobs/check", small, ZSTD_JSON, chunked)
      expect({ chunked, status: answer.status }).toEqual({ chunked, status: 413 })
      expect(isErrorBody(JSON.parse(answer.body.toString()))).toBe(true)
      expect(JSON.parse(answer.body.toString()).code).toBe("payload_too_large")
    }
    // 1 GiB of zeros against the push's 256 MiB: stopped at the limit, never held whole.
    const big = bomb(16)
    const push = await send("POST", "/zoe/bombed/push", big, ZSTD_JSON)
    expect({ status: push.status, code: JSON.parse(push.body.toString()).code }).toEqual({ status: 413, code: "payload_too_large" })
    const fetchBomb = await send("POST", "/zoe/bombed/chunks/fetch", small, ZSTD_JSON)
    expect({ status: fetchBomb.status, code: JSON.parse(fetchBomb.body.toString()).code }).toEqual({ status: 413, code: "payload_too_large" })
    const batch = await send("POST", "/zoe/bombed/chunks/batch", bomb(2), { "content-type": "application/octet-stream", "content-encoding": "zstd" })
    expect({ status: batch.status, code: JSON.parse(batch.body.toString()).code }).toEqual({ status: 413, code: "payload_too_large" })

    // Not zstd at all, and a frame cut short.
    const whole = zstd({ hashes: [Blake3.hash(Buffer.from("x"))] })
    for (const [what, body] of [["garbage", Buffer.from("{\"hashes\": []}")], ["truncated", whole.subarray(0, whole.length - 3)]] as const) {
      const answer = await send("POST", "/zoe/bombed/blobs/check", body, ZSTD_JSON)
      expect({ what, status: answer.status, error: isErrorBody(JSON.parse(answer.body.toString())) }).toEqual({ what, status: 400, error: true })
    }
    const pushGarbage = await send("POST", "/zoe/bombed/push", Buffer.from("not zstd at all"), ZSTD_JSON)
    expect({ status: pushGarbage.status, error: isErrorBody(JSON.parse(pushGarbage.body.toString())) }).toEqual({ status: 400, error: true })

    // Without a token, to a repository that does not exist: 404 before any inflating (not the 413 of inflating to 1 MiB).
    for (const route of ["blobs/check", "push"]) {
      const anonymous = await fetch(`${server.url}/api/nobody/none/${route}`, { method: "POST", headers: ZSTD_JSON, body: small })
      expect({ route, status: anonymous.status, error: isErrorBody(await anonymous.json()) }).toEqual({ route, status: 404, error: true })
    }

    // The server is fine afterwards.
    expect((await api(server.url, token).get("/zoe/bombed")).status).toBe(200)
  }, 180_000)

  it("zstd bodies that stall after their frame header (chunks/fetch, no credentials) hold none of the decode budget: a push's zstd batch still answers 200", async () => {
    await newRepo("stalled")
    // Each declares 2 MiB (the route's limit) in its header: 140 x 2 MiB is past the 256 MiB budget.
    const head = zstdCompressSync(Buffer.alloc(2 * 1024 * 1024 - 16), { params: { [constants.ZSTD_c_contentSizeFlag]: 1 } }).subarray(0, 32)
    const url = new URL(server.url)
    const early: Array<string> = []
    const sockets = await Promise.all(Array.from({ length: 140 }, () =>
      new Promise<net.Socket>((resolve, reject) => {
        const socket = net.connect(Number(url.port), url.hostname, () => {
          socket.write(`POST /api/nobody/nothing/chunks/fetch HTTP/1.1\r\nhost: grove.test\r\ncontent-type: application/json\r\ncontent-encoding: zstd\r\ncontent-length: ${64 * 1024}\r\n\r\n`)
          socket.write(head, () => resolve(socket))
        })
        socket.on("data", (d: Buffer) => early.push(d.toString().split("\r\n")[0]!))
        socket.on("error", reject)
      })
    ))
    try {
      // Let the server read every header (the decoder began at a header's 18th byte before the fix).
      await new Promise((resolve) => setTimeout(resolve, 1500))
      const data = Array.from({ length: 20 }, (_, i) => Buffer.from(`stalled neighbour ${i}\n`.repeat(200)))
      const frames = batchBody(data.map((d) => ({ hash: Blake3.hash(d), data: d })))
      const batch = await send("POST", "/zoe/stalled/chunks/batch", zstdCompressSync(frames), { "content-type": "application/octet-stream", "content-encoding": "zstd" })
      // Before: 503 unavailable ("too many compressed request bodies are being decoded"), and some stalled ones 503 too.
      expect({ status: batch.status, body: JSON.parse(batch.body.toString()), early }).toEqual({ status: 200, body: { ok: true, received: 20 }, early: [] })
    } finally {
      for (const socket of sockets) socket.destroy()
    }
  }, 120_000)

  it("8 concurrent 32 KB bombs against the push answer 413 without growing the server's peak memory; a body under the limit but past 64x is refused", async () => {
    await newRepo("hwm")
    const pid = server.process.pid!
    const status = (field: string) => Number(new RegExp(`${field}:\\s+(\\d+)`).exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"))?.[1]) / 1024
    // Writing 5 to clear_refs resets VmHWM to the current RSS (Linux >= 4.0): the peak of this test alone.
    fs.writeFileSync(`/proc/${pid}/clear_refs`, "5")
    const before = status("VmRSS")
    const spaces = zstdCompressSync(Buffer.alloc(1024 ** 3, 0x20)) // 1 GiB: ~32 KB
    expect(spaces.length).toBeLessThan(64 * 1024)
    const answers = await Promise.all(Array.from({ length: 8 }, () => send("POST", "/zoe/hwm/push", spaces, ZSTD_JSON)))
    expect(answers.map((a) => [a.status, JSON.parse(a.body.toString()).code])).toEqual(Array.from({ length: 8 }, () => [413, "payload_too_large"]))
    const grown = status("VmHWM") - before
    // Before the fix each bomb inflated to the push's 256 MiB (~2 GiB for 8); now each stops at ~4 MiB.
    expect(grown, `VmHWM grew by ${grown.toFixed(0)} MiB`).toBeLessThan(200)

    // A real push padded with 16 MiB of blanks (valid JSON, well under 256 MiB) compresses ~1000x: 413.
    const c = buildCommit({ branch: "padded", files: { "a.txt": "a\n" } })
    const padded = zstd(JSON.stringify(pushBody({ branch: "padded", commits: [c] })) + " ".repeat(16 * 1024 * 1024))
    const refused = await send("POST", "/zoe/hwm/push", padded, ZSTD_JSON)
    expect({ status: refused.status, code: JSON.parse(refused.body.toString()).code }).toEqual({ status: 413, code: "payload_too_large" })
  }, 180_000)
})
