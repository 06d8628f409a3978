/**
 * A DNS server on 127.0.0.1 that answers A queries from a table the test changes as it goes (for
 * DNS-rebinding tests), with a TTL of 0. Unknown names answer NXDOMAIN; AAAA queries of known
 * names answer with no records.
 */
import * as dgram from "node:dgram"

export interface FakeDns {
  /** `127.0.0.1:port`, for GROVE_DNS_SERVERS. */
  readonly address: string
  readonly set: (name: string, ipv4: string | undefined) => void
  readonly queries: () => ReadonlyArray<string>
  readonly close: () => Promise<void>
}

const readName = (message: Buffer, offset: number): [string, number] => {
  const labels: Array<string> = []
  let at = offset
  while (message[at]! !== 0) {
    const length = message[at]!
    labels.push(message.subarray(at + 1, at + 1 + length).toString("ascii"))
    at += length + 1
  }
  return [labels.join(".").toLowerCase(), at + 1]
}

export const startFakeDns = async (): Promise<FakeDns> => {
  const table = new Map<string, string>()
  const seen: Array<string> = []
  const socket = dgram.createSocket("udp4")
  socket.on("message", (message, peer) => {
    if (message.length < 12) return
    const [name, end] = readName(message, 12)
    const type = message.readUInt16BE(end)
    seen.push(`${name}/${type === 1 ? "A" : type === 28 ? "AAAA" : type}`)
    const question = message.subarray(12, end + 4)
    const ip = table.get(name)
    const answer = ip !== undefined && type === 1
    const header = Buffer.alloc(12)
    header.writeUInt16BE(message.readUInt16BE(0), 0)
    header.writeUInt16BE(ip === undefined ? 0x8183 : 0x8180, 2)
    header.writeUInt16BE(1, 4)
    header.writeUInt16BE(answer ? 1 : 0, 6)
    const parts: Array<Buffer> = [header, question]
    if (answer) {
      const record = Buffer.alloc(16)
      record.writeUInt16BE(0xc00c, 0)
      record.writeUInt16BE(1, 2)
      record.writeUInt16BE(1, 4)
      record.writeUInt32BE(0, 6)
      record.writeUInt16BE(4, 10)
      ip.split(".").forEach((byte, i) => record.writeUInt8(Number(byte), 12 + i))
      parts.push(record)
    }
    socket.send(Buffer.concat(parts), peer.port, peer.address)
  })
  await new Promise<void>((resolve) => socket.bind(0, "127.0.0.1", resolve))
  return {
    address: `127.0.0.1:${socket.address().port}`,
    set: (name, ip) => (ip === undefined ? table.delete(name.toLowerCase()) : table.set(name.toLowerCase(), ip)),
    queries: () => [...seen],
    close: () => new Promise((resolve) => socket.close(() => resolve()))
  }
}
