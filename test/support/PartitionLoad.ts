/**
 * Write load over every command partition of a two-node cluster, for the suites that restart a
 * dependency under load (PostgreSQL, the Kafka broker): one repository per partition, branch creates
 * through both nodes until stopped (what answered 201 is acknowledged), and per partition the time
 * until a write succeeded again.
 */
import { expect } from "@effect/vitest"
import { Murmur2 } from "@grove/bus"
import type { GroveServer } from "./GroveServer.ts"
import { api } from "./http.ts"

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/** One repository name per command partition (the Repository entity key is `owner/name`). */
export const repoPerPartition = (owner: string, partitions: number): Array<string> => {
  const names: Array<string | undefined> = Array.from({ length: partitions }, () => undefined)
  for (let i = 0, found = 0; found < partitions; i++) {
    const partition = Murmur2.partitionFor(`${owner}/p-${i}`, partitions)
    if (names[partition] === undefined) {
      names[partition] = `p-${i}`
      found++
    }
  }
  return names as Array<string>
}

export interface Acknowledged {
  readonly repo: string
  readonly branch: string
}

export interface LoadTarget {
  /** The cluster's nodes, read at every request (a suite may replace them). */
  readonly nodes: () => ReadonlyArray<GroveServer>
  readonly key: () => string
  readonly owner: string
  readonly names: ReadonlyArray<string>
}

/**
 * Branch creates from four workers over every partition through both nodes until `stop()` (at most
 * `maxWrites`): each answer is 201, 202 or a retryable 503 (after which that worker pauses 100 ms).
 */
export const startLoad = (target: LoadTarget, tag: string, maxWrites: number) => {
  const acknowledged: Array<Acknowledged> = []
  const statuses = new Map<number, number>()
  let slowest503 = 0
  let stopped = false
  let seq = 0
  const workers = Array.from({ length: 4 }, async (_, worker) => {
    while (!stopped && seq < maxWrites) {
      const n = seq++
      const repo = target.names[n % target.names.length]!
      const branch = `${tag}-${worker}-${n}`
      const sentAt = Date.now()
      const nodes = target.nodes()
      const reply = await api(nodes[n % nodes.length]!.url, target.key()).post(`/${target.owner}/${repo}/branches`, { name: branch })
        .catch(() => undefined)
      if (reply === undefined) continue
      statuses.set(reply.status, (statuses.get(reply.status) ?? 0) + 1)
      if (reply.status === 201) acknowledged.push({ repo, branch })
      else expect([202, 503], JSON.stringify(reply.body)).toContain(reply.status)
      if (reply.status === 503) {
        expect(reply.body.retryable, JSON.stringify(reply.body)).toBe(true)
        slowest503 = Math.max(slowest503, Date.now() - sentAt)
        await sleep(100)
      }
    }
  })
  return {
    acknowledged,
    statuses,
    slowest503: () => slowest503,
    stop: async () => {
      stopped = true
      await Promise.all(workers)
    }
  }
}

/**
 * Per partition, how long after `readyAt` a write through either node (in turn) first answered 201
 * (infinity past `within`). One write at a time per partition, `pauseMs` apart: probes that pile up
 * faster than a loaded machine serves them would measure their own queue, not the recovery.
 * `attempts`, when given, gets every probe's answer per partition: `status@ms after readyAt` (0: no answer).
 */
export const recovery = (
  target: LoadTarget,
  readyAt: number,
  tag: string,
  within: number,
  pauseMs: number,
  attempts?: Array<Array<string>>
) =>
  Promise.all(target.names.map(async (repo, partition) => {
    for (let attempt = 0;; attempt++) {
      const nodes = target.nodes()
      const reply = await api(nodes[(partition + attempt) % nodes.length]!.url, target.key())
        .post(`/${target.owner}/${repo}/branches`, { name: `${tag}-${attempt}` })
        .catch(() => undefined)
      if (attempts !== undefined) (attempts[partition] ??= []).push(`${reply?.status ?? 0}@${Date.now() - readyAt}`)
      if (reply?.status === 201) return Date.now() - readyAt
      if (Date.now() - readyAt > within) return Number.POSITIVE_INFINITY
      await sleep(pauseMs)
    }
  }))
