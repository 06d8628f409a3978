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
const NOTIFICATION = 0x41

/**
 * Finds the NotificationResponse messages ('A') in the backend's output, however it is cut into
 * chunks, and hands each one's channel and payload to `emit`. Other messages are skipped by length.
 */
export const notificationScanner = (emit: (channel: string, payload: string) => void) => {
  const header = Buffer.alloc(5)
  let headerFill = 0
  // The rest of the current message: skipped, or (an 'A') collected into `body`.
  let remaining = 0
  let body: Buffer | undefined
  let bodyFill = 0
  return (chunk: Uint8Array) => {
    let i = 0
    while (i < chunk.length) {
      if (remaining > 0) {
        const n = Math.min(remaining, chunk.length - i)
        if (body !== undefined) body.set(chunk.subarray(i, i + n), bodyFill)
        bodyFill += n
        remaining -= n
        i += n
        if (remaining === 0 && body !== undefined) {
          // Int32 process id, then the channel and the payload, each NUL-terminated.
          const channelEnd = body.indexOf(0, 4)
          const payloadEnd = body.indexOf(0, channelEnd + 1)
          emit(body.toString("utf8", 4, channelEnd), body.toString("utf8", channelEnd + 1, payloadEnd))
          body = undefined
        }
        continue
      }
      header[headerFill++] = chunk[i++]!
      if (headerFill < 5) continue
      headerFill = 0
      remaining = header.readInt32BE(1) - 4
      bodyFill = 0
      body = header[0] === NOTIFICATION && remaining > 0 ? Buffer.alloc(remaining) : undefined
    }
  }
}

/**
 * `onNotification`, when given, gets each notification the backend sends, before the client reads
 * the rest of that output (so before the notifying transaction's COMMIT answers): the embedded
 * database's notifications are read here, since its one connection cannot be held by a LISTEN.
 */
export const pgliteStream = (db: PGlite, onNotification?: (channel: string, payload: string) => void) => (): Duplex => {
  const scan = onNotification === undefined ? undefined : notificationScanner(onNotification)
  let pending: Buffer = Buffer.alloc(0)
  // Messages run strictly one after another, in arrival order.
  let chain: Promise<void> = Promise.resolve()
  const run = (messages: Uint8Array) => {
    chain = chain.then(() =>
      db.runExclusive(() =>
        db.execProtocolRawStream(messages, {
          // A no-op for the file systems used here (a directory through Emscripten's NODEFS, whose writes go
          // straight to the files, or memory), yet a mutex and its promises per call: skipped.
          syncToFs: false,
          onRawData: (bytes) => {
            scan?.(bytes)
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
