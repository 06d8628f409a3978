/**
 * An in-memory PGlite whose connection counts what crosses it: the bytes the database sends and the statements
 * the client runs. The statement-count tests (a merge's, a push's, a CI queue's) pin their round trips with it.
 */
import { PGlite } from "@electric-sql/pglite"
import { PgClient } from "@effect/sql-pg"
import { pgliteStream } from "@grove/storage/PgliteStream"
import { Effect, Layer } from "effect"

/** What the counted connection has seen so far. */
export interface Traffic {
  /** Bytes the database sent. */
  received: number
  /** Each statement the client ran (a Bind of a prepared or unnamed statement, or a simple Query): its text. */
  readonly statements: Array<string>
}

/**
 * Reads the client's messages (however they are cut into chunks): a Parse names a statement's text, a Bind
 * runs it, a Query runs its own text.
 */
const statementScanner = (onStatement: (text: string) => void) => {
  const texts = new Map<string, string>()
  let pending: Buffer = Buffer.alloc(0)
  let started = false
  return (chunk: Buffer) => {
    pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk])
    for (;;) {
      if (!started) {
        // The startup message (and an SSL request before it) has no type byte.
        if (pending.length < 8) return
        const length = pending.readInt32BE(0)
        if (pending.length < length) return
        if (pending.readInt32BE(4) !== 80877103) started = true
        pending = pending.subarray(length)
        continue
      }
      if (pending.length < 5) return
      const end = 1 + pending.readInt32BE(1)
      if (pending.length < end) return
      const type = String.fromCharCode(pending[0]!)
      const body = pending.subarray(5, end)
      const cString = (from: number) => body.toString("utf8", from, body.indexOf(0, from))
      if (type === "P") {
        const name = cString(0)
        texts.set(name, cString(name.length + 1))
      } else if (type === "B") {
        const portal = cString(0)
        const name = cString(portal.length + 1)
        onStatement(texts.get(name) ?? `(statement ${name})`)
      } else if (type === "Q") {
        onStatement(cString(0))
      }
      pending = pending.subarray(end)
    }
  }
}

/** A fresh in-memory database (not yet migrated) on one counted connection, as the embedded server reaches its own. */
export const countedDatabase = () => {
  const traffic: Traffic = { received: 0, statements: [] }
  const layer = Layer.unwrap(Effect.gen(function*() {
    const db = yield* Effect.acquireRelease(Effect.promise(() => PGlite.create()), (db) => Effect.promise(() => db.close()))
    const stream = pgliteStream(db)
    return PgClient.layer({
      stream: () => {
        const duplex = stream()
        const scan = statementScanner((text) => traffic.statements.push(text.replace(/\s+/g, " ").trim()))
        const push = duplex.push.bind(duplex)
        duplex.push = (chunk: Buffer | null, encoding?: BufferEncoding) => {
          if (chunk !== null) traffic.received += chunk.length
          return push(chunk, encoding)
        }
        const write = duplex.write.bind(duplex) as (chunk: unknown, ...rest: Array<unknown>) => boolean
        duplex.write = ((chunk: unknown, ...rest: Array<unknown>) => {
          scan(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as Uint8Array))
          return write(chunk, ...rest)
        }) as typeof duplex.write
        return duplex
      },
      username: "postgres",
      database: "postgres",
      maxConnections: 1,
      multiplex: true
    })
  }))
  return { traffic, layer }
}
