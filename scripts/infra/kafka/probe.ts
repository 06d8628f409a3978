/**
 * Kafka readiness: one Metadata request (v4, no topics) over a plain socket. A KRaft broker
 * only serves requests once it is registered and unfenced, so an answer that lists the
 * broker itself means producers and consumers can use it. No client library is needed.
 */
import { Effect } from "effect"
import * as net from "node:net"

export interface MetadataBroker {
  readonly nodeId: number
  readonly host: string
  readonly port: number
}

const METADATA = 3
const VERSION = 4
const CLIENT_ID = "grove-probe"

const request = (correlationId: number): Buffer => {
  const clientId = Buffer.from(CLIENT_ID, "utf8")
  // api key, api version, correlation id, client id, then the body:
  // topics = empty array (brokers only), allow_auto_topic_creation = false.
  const body = Buffer.alloc(2 + 2 + 4 + 2 + clientId.length + 4 + 1)
  let at = body.writeInt16BE(METADATA, 0)
  at = body.writeInt16BE(VERSION, at)
  at = body.writeInt32BE(correlationId, at)
  at = body.writeInt16BE(clientId.length, at)
  at += clientId.copy(body, at)
  at = body.writeInt32BE(0, at)
  body.writeInt8(0, at)
  const size = Buffer.alloc(4)
  size.writeInt32BE(body.length, 0)
  return Buffer.concat([size, body])
}

/** Reads the broker list from a Metadata v4 response (after the size prefix). */
const parseBrokers = (response: Buffer, correlationId: number): ReadonlyArray<MetadataBroker> | undefined => {
  if (response.readInt32BE(0) !== correlationId) return undefined
  let at = 8 // correlation id, throttle time
  const count = response.readInt32BE(at)
  at += 4
  const brokers: Array<MetadataBroker> = []
  for (let i = 0; i < count; i++) {
    const nodeId = response.readInt32BE(at)
    const hostLength = response.readInt16BE(at + 4)
    const host = response.toString("utf8", at + 6, at + 6 + hostLength)
    at += 6 + hostLength
    const port = response.readInt32BE(at)
    const rackLength = response.readInt16BE(at + 4)
    at += 6 + Math.max(0, rackLength)
    brokers.push({ nodeId, host, port })
  }
  return brokers
}

/**
 * The brokers a Kafka node at host:port reports, or `undefined` when it does not answer
 * (not listening yet, not serving yet, or not within `timeoutMs`). Never fails.
 */
export const metadataBrokers = (
  host: string,
  port: number,
  timeoutMs = 2_000
): Effect.Effect<ReadonlyArray<MetadataBroker> | undefined> =>
  Effect.callback((resume) => {
    const correlationId = 1 + Math.floor(Math.random() * 1_000_000)
    const socket = net.connect({ host, port })
    let received = Buffer.alloc(0)
    let settled = false
    const settle = (brokers: ReadonlyArray<MetadataBroker> | undefined) => {
      if (settled) return
      settled = true
      socket.destroy()
      resume(Effect.succeed(brokers))
    }
    socket.setTimeout(timeoutMs, () => settle(undefined))
    socket.once("error", () => settle(undefined))
    socket.once("close", () => settle(undefined))
    socket.once("connect", () => socket.write(request(correlationId)))
    socket.on("data", (data: Buffer) => {
      received = Buffer.concat([received, data])
      if (received.length < 4) return
      const size = received.readInt32BE(0)
      if (received.length < 4 + size) return
      try {
        settle(parseBrokers(received.subarray(4, 4 + size), correlationId))
      } catch {
        settle(undefined)
      }
    })
    return Effect.sync(() => {
      settled = true
      socket.destroy()
    })
  })

/** True when the node at host:port answers a Metadata request and lists itself. */
export const isKafkaReady = (host: string, port: number): Effect.Effect<boolean> =>
  Effect.map(metadataBrokers(host, port), (brokers) => brokers?.some((b) => b.port === port) ?? false)
