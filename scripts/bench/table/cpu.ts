/**
 * CPU time of process trees, read from /proc, for the scaling runs (`--nodes N`): each Grove
 * node, and the infrastructure (Kafka, PostgreSQL with its backends, MinIO) that this process
 * started. A tree's CPU counts its live processes and the children they have reaped, so a
 * delta between two snapshots includes processes that came and went in between.
 */
import * as fs from "node:fs"

const TICK_MS = 10 // USER_HZ is 100 on Linux

interface Proc {
  readonly pid: number
  readonly ppid: number
  /** utime + stime + cutime + cstime, in ms. */
  readonly cpuMs: number
  readonly command: string
}

const readProc = (pid: number): Proc | undefined => {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8")
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ").map(Number)
    const command = fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").replaceAll("\0", " ")
    return { pid, ppid: fields[1]!, cpuMs: (fields[11]! + fields[12]! + fields[13]! + fields[14]!) * TICK_MS, command }
  } catch {
    return undefined // gone meanwhile
  }
}

const allProcs = (): Array<Proc> =>
  fs.readdirSync("/proc").filter((name) => /^\d+$/.test(name)).flatMap((name) => readProc(Number(name)) ?? [])

/** Every process under `root` (itself included). */
const tree = (procs: ReadonlyArray<Proc>, root: number): Array<Proc> => {
  const children = new Map<number, Array<Proc>>()
  for (const p of procs) children.set(p.ppid, [...(children.get(p.ppid) ?? []), p])
  const out: Array<Proc> = []
  const stack = procs.filter((p) => p.pid === root)
  while (stack.length > 0) {
    const p = stack.pop()!
    out.push(p)
    stack.push(...(children.get(p.pid) ?? []))
  }
  return out
}

export type Infra = "kafka" | "postgres" | "minio"

/** Which infrastructure a command line belongs to (the topmost such process owns its subtree). */
const infraOf = (command: string): Infra | undefined =>
  /kafka\.Kafka|kafka-server|org\.apache\.kafka/.test(command) ? "kafka" : /(^|\/)postgres(\s|$)|postgres:/.test(command) ? "postgres" : /(^|\/)minio(\s|$)/.test(command) ? "minio" : undefined

export interface CpuSnapshot {
  /** CPU ms per Grove node pid (its whole tree). */
  readonly nodes: ReadonlyMap<number, number>
  readonly infra: Readonly<Record<Infra, number>>
  /** This process (the load generator), ms. */
  readonly self: number
}

/** CPU so far of each node's tree and of the infrastructure this process started. */
export const snapshot = (nodePids: ReadonlyArray<number>): CpuSnapshot => {
  const procs = allProcs()
  const nodes = new Map(nodePids.map((pid) => [pid, tree(procs, pid).reduce((s, p) => s + p.cpuMs, 0)]))
  const infra: Record<Infra, number> = { kafka: 0, postgres: 0, minio: 0 }
  const nodeSet = new Set(nodePids)
  const visit = (pid: number) => {
    for (const child of procs.filter((p) => p.ppid === pid && !nodeSet.has(p.pid))) {
      const kind = infraOf(child.command)
      if (kind !== undefined) infra[kind] += tree(procs, child.pid).reduce((s, p) => s + p.cpuMs, 0)
      else visit(child.pid)
    }
  }
  visit(process.pid)
  const usage = process.cpuUsage()
  return { nodes, infra, self: (usage.user + usage.system) / 1000 }
}

export interface CpuDelta {
  readonly nodes: ReadonlyArray<{ readonly pid: number; readonly cpuMs: number }>
  readonly infra: Readonly<Record<Infra, number>>
  readonly self: number
  readonly wallMs: number
}

/** Measures the CPU every part used while `work` ran. */
export const cpuDuring = async <A>(nodePids: ReadonlyArray<number>, work: () => Promise<A>): Promise<{ result: A; cpu: CpuDelta }> => {
  const before = snapshot(nodePids)
  const t0 = performance.now()
  const result = await work()
  const wallMs = performance.now() - t0
  const after = snapshot(nodePids)
  return {
    result,
    cpu: {
      nodes: nodePids.map((pid) => ({ pid, cpuMs: (after.nodes.get(pid) ?? 0) - (before.nodes.get(pid) ?? 0) })),
      infra: { kafka: after.infra.kafka - before.infra.kafka, postgres: after.infra.postgres - before.infra.postgres, minio: after.infra.minio - before.infra.minio },
      self: after.self - before.self,
      wallMs
    }
  }
}

/**
 * The cost lines of a scaling run: per node its CPU and CPU per operation, the infrastructure's
 * CPU per operation and share, and the load generator's CPU (if it nears one core, the client
 * and not the cluster is the limit).
 */
export const costReport = (cpu: CpuDelta, operations: number, what: string, perNodeOps?: ReadonlyArray<number>): Array<string> => {
  const grove = cpu.nodes.reduce((s, n) => s + n.cpuMs, 0)
  const infra = cpu.infra.kafka + cpu.infra.postgres + cpu.infra.minio
  const per = (ms: number, n = operations) => (n > 0 ? `${((ms / n) * 1000).toFixed(0)} µs` : "n/a")
  const seconds = cpu.wallMs / 1000
  return [
    `${operations} ${what}s in ${seconds.toFixed(1)} s (${(operations / seconds).toFixed(0)}/s)`,
    ...cpu.nodes.map((n, i) =>
      `  node ${i + 1} (pid ${n.pid}): CPU ${(n.cpuMs / 1000).toFixed(2)} s (${((n.cpuMs / cpu.wallMs) * 100).toFixed(0)}% of a core), ` +
      `${per(n.cpuMs)} per ${what} of all${perNodeOps === undefined ? "" : `, ${per(n.cpuMs, perNodeOps[i])} per ${what} it answered (${perNodeOps[i]})`}`
    ),
    `  grove nodes together: ${per(grove)} CPU per ${what}`,
    `  infrastructure: kafka ${per(cpu.infra.kafka)}, postgres ${per(cpu.infra.postgres)}, minio ${per(cpu.infra.minio)} CPU per ${what}; ` +
    `${((infra / Math.max(1, grove + infra)) * 100).toFixed(0)}% of the cluster's CPU (${((infra / cpu.wallMs) * 100).toFixed(0)}% of a core)`,
    `  load generator (this process): ${per(cpu.self)} per ${what}, ${((cpu.self / cpu.wallMs) * 100).toFixed(0)}% of a core`
  ]
}
