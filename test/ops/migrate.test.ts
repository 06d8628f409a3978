/**
 * `grove-server migrate` on an embedded data directory: it applies every migration and says so, then
 * finds nothing to apply; a node refuses, with a clear message, a database that a newer Grove migrated
 * (and so does migrate). Waiting on an older schema (`--migrations wait`, cluster rollouts) is covered by
 * packages/storage/src/Migrations.test.ts.
 */
import { afterAll, describe, expect, it } from "@effect/vitest"
import { DbEmbedded, Migrations } from "@grove/storage"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { run, SERVER_BIN } from "../support/GroveServer.ts"

const dirs: Array<string> = []
const freshDir = () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "grove-migrate-"))
  dirs.push(dir)
  return dir
}

afterAll(() => {
  for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true })
})

describe("grove-server migrate", () => {
  it("applies the pending migrations once, saying which; a second run has nothing to apply", async () => {
    const dataDir = freshDir()
    const first = await run(SERVER_BIN, ["migrate", "--data-dir", dataDir], { timeoutMs: 180_000 })
    expect(first.code, first.stderr).toBe(0)
    expect(first.stdout).toContain(`applied ${Migrations.LATEST} migrations to the embedded database in ${dataDir}: 0001_entity_runtime, `)
    expect(first.stdout).toContain(`it is now at migration ${Migrations.LATEST}`)
    const second = await run(SERVER_BIN, ["migrate", "--data-dir", dataDir], { timeoutMs: 180_000 })
    expect(second.code, second.stderr).toBe(0)
    expect(second.stdout).toContain(`is at migration ${Migrations.LATEST}, this version's latest: nothing to apply`)
  }, 400_000)

  it("a database a newer Grove migrated is refused by the node and by migrate", async () => {
    const dataDir = freshDir()
    const migrated = await run(SERVER_BIN, ["migrate", "--data-dir", dataDir], { timeoutMs: 180_000 })
    expect(migrated.code, migrated.stderr).toBe(0)
    // What a newer version's migrate leaves behind.
    await Effect.runPromise(Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* sql`INSERT INTO grove_migrations (migration_id, name) VALUES (${Migrations.LATEST + 1}, 'from_a_newer_grove')`
    }).pipe(Effect.provide(DbEmbedded.layer({ dataDir: path.join(dataDir, "db") }))))

    const serve = await run(SERVER_BIN, ["serve", "--port", "0", "--data-dir", dataDir], { timeoutMs: 180_000 })
    expect(serve.code).toBe(1)
    const refusal = `the database schema is at migration ${Migrations.LATEST + 1}, newer than this version of Grove knows (${Migrations.LATEST})`
    expect(serve.stderr).toContain(refusal)
    expect(serve.stdout).not.toContain("listening on")
    const again = await run(SERVER_BIN, ["migrate", "--data-dir", dataDir], { timeoutMs: 180_000 })
    expect(again.code).toBe(1)
    expect(again.stderr).toContain(refusal)
  }, 400_000)

  it("an unknown option is refused with the usage's exit code", async () => {
    const refused = await run(SERVER_BIN, ["migrate", "--no-such-option"])
    expect(refused.code).toBe(2)
    expect(refused.stderr).toContain("grove-server migrate:")
  })
})
