/**
 * A concurrent workload on one repository for the stress suites: clients push branches made from
 * main, sync them, merge them and revert squashes, all at once, against one or more server nodes
 * (a request that cannot reach a node is retried on the next). Every answer is recorded, and
 * `checkInvariants` verifies what must hold afterwards:
 * - main is a linear chain of commits on `main` (squashes and reverts);
 * - every merge answered 200 put exactly one commit on main, and no other merge did;
 * - every acknowledged push is in its branch's history;
 * - nothing answered 500, and every 409 carries a known code.
 */
import { expect } from "@effect/vitest"
import * as Blake3 from "@grove/core/objects/Blake3"
import { buildCommit, type Built, pushBody } from "./content.ts"
import { api, type Reply } from "./http.ts"

export interface Outcome {
  readonly op: "push" | "merge" | "sync" | "revert"
  readonly status: number
  readonly body: any
  readonly branch: string
  readonly tip?: string
}

export interface WorkloadOptions {
  readonly urls: () => ReadonlyArray<string>
  readonly token: string
  readonly owner: string
  readonly repo: string
  readonly clients: number
  readonly rounds: number
  /** Called once, after this many rounds of client 0 (e.g. to kill a node). */
  readonly midway?: { readonly afterRounds: number; readonly action: () => Promise<void> }
}

type Snapshot = Built["snapshot"]

/** The node answers 503/502 or is unreachable: try the next node (a killed node's partitions move). */
const call = async (options: WorkloadOptions, attempt: (url: string) => Promise<Reply>): Promise<Reply> => {
  let last: Reply | undefined
  for (let i = 0; i < 60; i++) {
    const urls = options.urls()
    const url = urls[i % urls.length]!
    try {
      const reply = await attempt(url)
      if (reply.status !== 503 && reply.status !== 502 && reply.status !== 202) return reply
      last = reply
    } catch {
      // connection refused or reset: the node is gone
    }
    await new Promise((r) => setTimeout(r, 250))
  }
  return last ?? { status: 599, body: { error: "no node answered" }, headers: new Headers() }
}

/** main's head and files, read through the API (commits/info returns the head's trees). */
export const mainState = async (url: string, token: string, owner: string, repo: string): Promise<{ head: string | null; snapshot: Snapshot }> => {
  const a = api(url, token)
  const head = (await a.get(`/${owner}/${repo}/branches/main`)).body.head as string | null
  if (head === null) return { head, snapshot: new Map() }
  const info = (await a.post(`/${owner}/${repo}/commits/info`, { hashes: [head] })).body
  const trees = new Map<string, Array<{ name: string; kind: string; hash: string; mode: string }>>(
    info.trees.map((t: { hash: string; entries: Array<{ name: string; kind: string; hash: string; mode: string }> }) => [t.hash, t.entries])
  )
  const snapshot = new Map<string, { hash: string; mode: "regular" | "executable" | "symlink" }>()
  const walk = (hash: string, prefix: string) => {
    for (const e of trees.get(hash) ?? []) {
      const p = prefix === "" ? e.name : `${prefix}/${e.name}`
      if (e.kind === "tree") walk(e.hash, p)
      else snapshot.set(p, { hash: e.hash, mode: e.mode as "regular" })
    }
  }
  walk(info.commits[0].manifest_hash, "")
  return { head, snapshot }
}

/** The content of every file of a snapshot is needed to build on it: the workload's files are all its own. */
const contents = new Map<string, string>()

const filesOf = (snapshot: Snapshot): Record<string, string> => {
  const out: Record<string, string> = {}
  for (const [path, file] of snapshot) {
    const text = contents.get(file.hash)
    if (text !== undefined) out[path] = text
  }
  return out
}

const remember = (files: Record<string, string>) => {
  for (const text of Object.values(files)) contents.set(Blake3.hash(text), text)
}

export const runWorkload = async (options: WorkloadOptions): Promise<Array<Outcome>> => {
  const outcomes: Array<Outcome> = []
  const { owner, repo, token } = options
  const client = async (id: number) => {
    for (let round = 0; round < options.rounds; round++) {
      if (id === 0 && options.midway !== undefined && round === options.midway.afterRounds) await options.midway.action()
      const branch = `c${id}-r${round}`
      const main = await mainState(options.urls()[0]!, token, owner, repo).catch(() => undefined) ??
        await mainState(options.urls().at(-1)!, token, owner, repo)
      const files = filesOf(main.snapshot)
      const own = { ...files, [`c${id}/r${round}.txt`]: `client ${id} round ${round}\n` }
      // Every third round also edits a shared file, so merges and syncs conflict now and then.
      if (round % 3 === 2) own["shared.txt"] = `client ${id} round ${round}\n`
      remember(own)
      const first = buildCommit({ branch, files: own, parentHash: main.head, parentSnapshot: main.snapshot, author: `c${id}` })
      const second = buildCommit({ branch, files: { ...own, [`c${id}/r${round}.txt`]: `client ${id} round ${round} v2\n` }, parent: first, author: `c${id}` })
      remember({ x: `client ${id} round ${round} v2\n` })
      const pushed = await call(options, (url) => api(url, token).post(`/${owner}/${repo}/push`, pushBody({ branch, commits: [first, second], description: `c${id} r${round}` })))
      outcomes.push({ op: "push", status: pushed.status, body: pushed.body, branch, tip: second.commit.hash })
      if (pushed.status !== 200 || pushed.body.success !== true) continue
      if (round % 4 === 1) {
        const synced = await call(options, (url) => api(url, token).post(`/${owner}/${repo}/branches/${branch}/sync`, {}, { "idempotency-key": `${repo}-${branch}-sync` }))
        outcomes.push({ op: "sync", status: synced.status, body: synced.body, branch })
      }
      // A retry after a lost answer (a killed node) carries the same key, so it replays the first answer;
      // main_moved is retryable by definition, with a new key.
      let merged: Reply | undefined
      for (let attempt = 0; attempt < 4; attempt++) {
        merged = await call(options, (url) =>
          api(url, token).post(`/${owner}/${repo}/branches/${branch}/merge`, {}, { "idempotency-key": `${repo}-${branch}-merge-${attempt}` }))
        outcomes.push({ op: "merge", status: merged.status, body: merged.body, branch })
        if (!(merged.status === 409 && merged.body.code === "main_moved")) break
      }
      if (merged === undefined) continue
      if (merged.status === 200 && round % 5 === 4) {
        const reverted = await call(options, (url) =>
          api(url, token).post(`/${owner}/${repo}/commits/${merged.body.commit_hash}/revert`, {}, { "idempotency-key": `${repo}-${branch}-revert` }))
        outcomes.push({ op: "revert", status: reverted.status, body: reverted.body, branch: "main" })
      }
    }
  }
  await Promise.all(Array.from({ length: options.clients }, (_, i) => client(i)))
  return outcomes
}

const KNOWN_409 = new Set(["conflict", "main_moved", "branch_moved", "revert_conflict", "not_on_branch"])

export const checkInvariants = async (url: string, token: string, owner: string, repo: string, outcomes: ReadonlyArray<Outcome>) => {
  const a = api(url, token)
  for (const o of outcomes) {
    expect(o.status, `${o.op} ${o.branch}: ${JSON.stringify(o.body)}`).not.toBe(500)
    expect([200, 400, 409], `${o.op} ${o.branch}: ${o.status} ${JSON.stringify(o.body)}`).toContain(o.status)
    if (o.status === 409) expect(KNOWN_409, JSON.stringify(o.body)).toContain(o.body.code)
  }
  // main: a linear chain of commits on main, oldest first.
  const chain = (await a.get(`/${owner}/${repo}/pull`)).body.commits as Array<{ hash: string; parent_hash: string | null; merge_parent_hash?: string; branch_name: string }>
  for (const [i, c] of chain.entries()) {
    expect(c.branch_name).toBe("main")
    expect(c.parent_hash).toBe(i === 0 ? null : chain[i - 1]!.hash)
  }
  expect(chain.at(-1)?.hash ?? null).toBe((await a.get(`/${owner}/${repo}`)).body.head)
  // Every 200 merge is on main exactly once; no other merge put anything there.
  const merges = outcomes.filter((o) => o.op === "merge" && o.status === 200)
  const squashes = chain.filter((c) => c.merge_parent_hash !== undefined)
  expect(squashes.map((c) => c.hash).sort()).toEqual(merges.map((m) => m.body.commit_hash as string).sort())
  expect(new Set(squashes.map((c) => c.merge_parent_hash)).size).toBe(squashes.length)
  for (const m of merges) expect((await a.get(`/${owner}/${repo}/branches/${m.branch}`)).body).toMatchObject({ status: "closed", state: "merged" })
  // Every acknowledged push is in its branch's history.
  for (const p of outcomes.filter((o) => o.op === "push" && o.status === 200 && o.body.success === true)) {
    const history = (await a.get(`/${owner}/${repo}/pull?branch_name=${encodeURIComponent(p.branch)}`)).body.commits as Array<{ hash: string }>
    expect(history.map((c) => c.hash), `push to ${p.branch}`).toContain(p.tip)
  }
  return { mainLength: chain.length, merges: merges.length, squashes: squashes.length }
}
