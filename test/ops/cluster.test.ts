/**
 * A cluster node's lifecycle on real Kafka, PostgreSQL and S3: started with `--migrations wait` against
 * an empty database it waits, saying why, until `grove-server migrate` has run, then serves; /readyz
 * names every check ready; /metrics shows the command latency of a write; on SIGTERM /readyz answers
 * 503 within 1 s while --shutdown-delay-ms keeps the listener open, and the node exits 0.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Murmur2 } from "@grove/bus"
import { type ChildProcess, execFile, spawn } from "node:child_process"
import { promisify } from "node:util"
import { type ClusterInfra, createClusterUser, startClusterInfra } from "../support/ClusterInfra.ts"
import { ROOT, run, SERVER_BIN } from "../support/GroveServer.ts"
import { api } from "../support/http.ts"
import { waitFor } from "../support/waitFor.ts"
import { Effect } from "effect"
import { freePort } from "../../scripts/infra/process.ts"

const exec = promisify(execFile)
const TOKEN = "cluster-scrape-token-0123"
let infra: ClusterInfra
let node: ChildProcess | undefined
let output = ""

beforeAll(async () => {
  infra = await startClusterInfra()
}, 600_000)

afterAll(async () => {
  if (node !== undefined && node.exitCode === null && node.signalCode === null) node.kill("SIGKILL")
  await infra?.close()
})

describe("a cluster node", () => {
  it("waits for grove-server migrate, serves, reports readiness and command latency, and drains on SIGTERM", async () => {
    const port = await Effect.runPromise(freePort())
    const url = `http://127.0.0.1:${port}`
    node = spawn(process.execPath, [
      SERVER_BIN, "serve", "--port", String(port), "--node-id", "ops-node",
      "--migrations", "wait", "--metrics-token", TOKEN, "--shutdown-delay-ms", "4000"
    ], { cwd: ROOT, env: { ...process.env, ...infra.env }, stdio: ["ignore", "pipe", "pipe"] })
    node.stdout!.on("data", (d: Buffer) => (output += d.toString()))
    node.stderr!.on("data", (d: Buffer) => (output += d.toString()))
    const exited = new Promise<number | null>((resolve) => node!.once("exit", (code) => resolve(code)))
    const said = (text: string) => async () => output.includes(text) ? true : undefined
    const explain = (error: unknown) => {
      throw new Error(`${String(error)}\nthe node said:\n${output}`)
    }

    await waitFor("the node's wait for the schema", said("run `grove-server migrate`"), 180_000).catch(explain)
    expect(output).toContain("it is at migration 0, this version needs")
    expect(output).not.toContain("listening on")

    const migrated = await run(SERVER_BIN, ["migrate"], { env: infra.env, timeoutMs: 180_000 })
    expect(migrated.code, migrated.stderr).toBe(0)
    expect(migrated.stdout).toContain("to the PostgreSQL database")
    await waitFor("the node to listen", said("listening on"), 180_000).catch(explain)

    const ready = await waitFor("/readyz 200", async () => {
      const response = await fetch(`${url}/readyz`).catch(() => undefined)
      return response?.status === 200 ? await response.json() as { checks: Array<{ name: string; ok: boolean }> } : undefined
    }, 120_000).catch(explain)
    expect(ready.checks.map((c) => `${c.name}=${c.ok}`)).toEqual([
      "database:ping=true", "object-store:ping=true", "bus:reachable=true", "partitions:served=true"
    ])

    const key = await createClusterUser(infra, "opal", { admin: true })
    const created = await api(url, key).post("/repos", { name: "scraped" })
    expect(created.status, JSON.stringify(created.body)).toBe(201)
    const scrape = await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } })
    expect(scrape.status).toBe(200)
    const text = await scrape.text()
    expect(text).toMatch(/grove_entity_command_duration_seconds_count\{entity_type="Repository",command="[^"]+",partition="\d+"\} [1-9]/)
    expect(text).toMatch(/grove_object_store_operation_duration_seconds_count\{operation="has",outcome="ok"\} [1-9]/)

    // Consumer lag per partition, read from Kafka at the scrape: all 32 command partitions are this node's.
    const metrics = async () => (await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } })).text()
    const lagOf = (scraped: string, partition: number) => {
      const match = new RegExp(`^grove_bus_consumer_lag\\{group="grove\\.entities",topic="grove\\.commands",partition="${partition}"\\} (\\d+)$`, "m").exec(scraped)
      return match === null ? undefined : Number(match[1])
    }
    expect([...text.matchAll(/^grove_bus_consumer_lag\{group="grove\.entities",topic="grove\.commands",partition="\d+"\} \d+$/gm)].length, text).toBe(32)
    expect(text).toMatch(/^grove_db_connections\{state="active"\} [1-9]/m)
    // A backlog shows as lag: the partition's fence row is held in PostgreSQL, so its first create waits on the
    // lock (a connection waiting_lock) and the second queues behind it; once the hold ends, the lag goes back to 0.
    const partition = Murmur2.partitionFor("opal/held-0", 32)
    const names = Array.from({ length: 500 }, (_, i) => `held-${i}`).filter((n) => Murmur2.partitionFor(`opal/${n}`, 32) === partition).slice(0, 2)
    const psql = (query: string) => exec("psql", [infra.databaseUrl, "-v", "ON_ERROR_STOP=1", "-qtAc", query])
    const hold = psql(
      `BEGIN; SELECT 1 FROM partition_epochs WHERE topic = 'grove.commands' AND partition = ${partition} FOR UPDATE; SELECT pg_sleep(8); COMMIT;`
    )
    await waitFor("the fence row held", async () =>
      (await psql("SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(8)%' AND state = 'active' AND pid <> pg_backend_pid()")).stdout.trim() === "1" || undefined)
    const creates = names.map((name) => api(url, key).post("/repos", { name }))
    const backlog = await waitFor("a lag of 2 on the held partition", async () => {
      const scraped = await metrics()
      return (lagOf(scraped, partition) ?? 0) >= 2 ? scraped : undefined
    }, 60_000).catch(explain)
    expect(backlog).toMatch(/^grove_db_connections\{state="waiting_lock"\} [1-9]/m)
    console.log(`partition ${partition} held: lag ${lagOf(backlog, partition)}, ${/^grove_db_connections\{state="waiting_lock"\} (\d+)/m.exec(backlog)?.[1]} connection(s) waiting on a lock`)
    await hold
    for (const reply of await Promise.all(creates)) expect([201, 202], JSON.stringify(reply.body)).toContain(reply.status)
    await waitFor("the held partition's lag back to 0", async () => lagOf(await metrics(), partition) === 0 || undefined, 60_000).catch(explain)

    const signalled = Date.now()
    node.kill("SIGTERM")
    const firstUnready = await waitFor("a 503 from /readyz", async () => {
      const sent = Date.now()
      const status = await fetch(`${url}/readyz`).then((r) => r.status, () => undefined)
      return status === 503 ? sent : undefined
    }, 30_000).catch(explain)
    expect(firstUnready - signalled).toBeLessThan(1_000)
    expect((await fetch(`${url}/healthz`)).status).toBe(200)
    expect(await exited).toBe(0)
  }, 900_000)
})
