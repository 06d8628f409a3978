/**
 * The invariant push preparation relies on: every blob of a repository's published commits is recorded for the
 * repository (repo_blobs), whichever writer published the commit. A push checks and records only the blobs it
 * places at a path where its first parent lacks them, and a clone reads blobs through those rows; so after a
 * server-side merge and a server-side revert, a one-file push on top must land and a fresh clone must get every
 * file byte for byte — a blob missing from the rows makes the clone fail.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import type { GroveServer } from "../support/GroveServer.ts"
import { at, type GroveOptions, json, ok, startSuiteServer, stopSuiteServers, tempDir, userOf } from "./harness.ts"

let server: GroveServer
let alice: GroveOptions

beforeAll(async () => {
  server = await startSuiteServer()
  alice = userOf(server, "alice", await server.createUser("alice"))
}, 300_000)

afterAll(stopSuiteServers)

/** Every file of a checkout (not .grove) as path -> bytes. */
const filesOf = (root: string): Record<string, Buffer> => {
  const out: Record<string, Buffer> = {}
  for (const entry of fs.readdirSync(root, { recursive: true, withFileTypes: true })) {
    const rel = path.relative(root, path.join(entry.parentPath, entry.name))
    if (entry.isFile() && !rel.startsWith(".grove")) out[rel] = fs.readFileSync(path.join(root, rel))
  }
  return out
}

const cloneOf = async (repo: string, branch?: string): Promise<Record<string, Buffer>> => {
  const parent = tempDir("clone")
  await ok(["clone", `alice/${repo}`, "copy", ...(branch === undefined ? [] : ["--branch", branch])], at(alice, parent))
  return filesOf(path.join(parent, "copy"))
}

const write = (root: string, file: string, data: string | Buffer) => {
  fs.mkdirSync(path.dirname(path.join(root, file)), { recursive: true })
  fs.writeFileSync(path.join(root, file), data)
}

describe("the blobs of published commits stay recorded for every writer", () => {
  it("after a server-side merge and revert, a one-file push on top lands and a fresh clone is byte-exact", async () => {
    const one = tempDir("inv")
    await ok(["init", "--name", "inv"], at(alice, one))
    // A file over the chunking threshold (10 MiB) goes by chunks, which a clone reads through the same rows.
    const big = crypto.randomBytes(12 * 1024 * 1024)
    write(one, "keep.txt", "keep\n")
    write(one, "shared.txt", "a\nb\nc\n")
    write(one, "dir/deep.bin", crypto.randomBytes(64 * 1024))
    write(one, "big.bin", big)
    await ok(["merge"], at(alice, one))
    const first = filesOf(one)

    // A second squash: an edit, a new file, and the large file again at a new path (the server has its blob).
    write(one, "shared.txt", "a\nB\nc\n")
    write(one, "dir/new.bin", crypto.randomBytes(32 * 1024))
    write(one, "copy/big.bin", big)
    const merged = json(await ok(["merge", "--json"], at(alice, one)))
    expect(await cloneOf("inv")).toEqual(filesOf(one))

    // The server-side revert puts the first squash's blobs back at their paths; the checkout pulls it.
    const reverted = json(await ok(["revert", merged.commit_hash, "--json"], at(alice, one)))
    expect(reverted).toMatchObject({ branch: "main", reverted_hash: merged.commit_hash })
    await ok(["pull"], at(alice, one))
    expect(filesOf(one)).toEqual(first)

    // One file edited on top of the revert: its parent has every other blob at its path, so only this one is recorded.
    write(one, "keep.txt", "keep, edited on top of the revert\n")
    const pushed = json(await ok(["push", "--json"], at(alice, one)))
    expect(pushed.pushed_commits).toBe(1)
    const expected = filesOf(one)
    expect(await cloneOf("inv", pushed.branch)).toEqual(expected)
    await ok(["merge"], at(alice, one))
    expect(await cloneOf("inv")).toEqual(expected)
  }, 240_000)
})
