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

export const pgliteStream = (db: PGlite) => (): Duplex => {
  let pending: Buffer = Buffer.alloc(0)
  // Messages run strictly one after another, in arrival order.
  let chain: Promise<void> = Promise.resolve()
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
        const length = pending.length >= 8 && pending.readInt32BE(4) === PROTOCOL_V3
          ? pending.readInt32BE(0)
          : pending.length >= 5
          ? 1 + pending.readInt32BE(1)
          : Number.POSITIVE_INFINITY
        if (pending.length < length) break
        const message = new Uint8Array(pending.subarray(0, length))
        pending = pending.subarray(length)
        chain = chain.then(() =>
          db.runExclusive(() =>
            db.execProtocolRawStream(message, {
              onRawData: (bytes) => {
                duplex.push(Buffer.from(bytes))
              }
            })
          )
        ).catch((error: unknown) => {
          duplex.destroy(error instanceof Error ? error : new Error(String(error)))
        })
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
