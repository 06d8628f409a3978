/**
 * A `Duplex` that speaks the PostgreSQL wire protocol to an in-process PGlite,
 * so the embedded mode uses the same driver (`@effect/sql-pg`), codecs and
 * dialect as the cluster mode. PGlite is one backend session: the client pool
 * must hold exactly one connection.
 */
import type { PGlite } from "@electric-sql/pglite"
import { Duplex } from "node:stream"

const SSL_REQUEST = 80877103
const CANCEL_REQUEST = 80877102
const PROTOCOL_V3 = 196608
const TERMINATE = 0x58

export const pgliteStream = (db: PGlite) => (): Duplex => {
  let pending: Buffer = Buffer.alloc(0)
  // Messages run strictly one after another, in arrival order.
  let chain: Promise<void> = Promise.resolve()
  const run = (messages: Uint8Array) => {
    chain = chain.then(() =>
      db.runExclusive(() =>
        db.execProtocolRawStream(messages, {
          onRawData: (bytes) => {
            duplex.push(Buffer.from(bytes))
          }
        })
      )
    ).catch((error: unknown) => {
      duplex.destroy(error instanceof Error ? error : new Error(String(error)))
    })
  }
  const duplex: Duplex = new Duplex({
    read() {},
    write(chunk: Buffer, _encoding, callback) {
      pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk])
      for (;;) {
        if (pending.length >= 8 && pending.readInt32BE(0) === 8 && pending.readInt32BE(4) === SSL_REQUEST) {
          pending = pending.subarray(8)
          duplex.push(Buffer.from("N"))
          continue
        }
        if (pending.length >= 16 && pending.readInt32BE(0) === 16 && pending.readInt32BE(4) === CANCEL_REQUEST) {
          pending = pending.subarray(16)
          continue
        }
        if (pending.length >= 8 && pending.readInt32BE(4) === PROTOCOL_V3) {
          // The startup message goes alone: PGlite answers it on a path of its own.
          const length = pending.readInt32BE(0)
          if (pending.length < length) break
          run(new Uint8Array(pending.subarray(0, length)))
          pending = pending.subarray(length)
          continue
        }
        // Every complete message in the chunk (a pipelined Parse/Bind/Describe/Execute/Sync, often several
        // queries' worth) in one call: PGlite's main loop reads them in turn as a backend reads its socket,
        // and one call instead of one per message saves its per-call mutex and promise round trips.
        // A Terminate ('X') goes alone too: PGlite ignores it only as the first byte of a call.
        let end = 0
        while (pending.length - end >= 5 && pending[end] !== 0 && pending.length - end >= 1 + pending.readInt32BE(end + 1)) {
          const terminate = pending[end] === TERMINATE
          if (terminate && end > 0) break
          end += 1 + pending.readInt32BE(end + 1)
          if (terminate) break
        }
        if (end === 0) break
        run(new Uint8Array(pending.subarray(0, end)))
        pending = pending.subarray(end)
      }
      callback()
    },
    final(callback) {
      duplex.push(null)
      callback()
    }
  })
  return duplex
}
