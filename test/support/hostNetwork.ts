/**
 * What a sandboxed CI step with the network on may reach (issue 20): the machine's non-loopback
 * addresses, not its loopback. Tests that a step must (or must not) reach put their listeners here.
 */
import * as net from "node:net"
import * as os from "node:os"

/** The machine's first non-loopback IPv4 address; undefined on a machine without one. */
export const hostAddress = (): string | undefined =>
  Object.values(os.networkInterfaces()).flat().find((entry) => entry !== undefined && entry.family === "IPv4" && !entry.internal)?.address

export interface Listener {
  readonly host: string
  readonly port: number
  readonly close: () => Promise<void>
}

/** A TCP listener on `host` that writes `greeting` and a newline to every connection; rejects when `host` cannot be bound. */
export const greeter = (host: string, greeting: string): Promise<Listener> =>
  new Promise((resolve, reject) => {
    const server = net.createServer((socket) => {
      socket.on("error", () => undefined)
      socket.end(`${greeting}\n`)
    })
    server.once("error", reject)
    server.listen(0, host, () =>
      resolve({
        host,
        port: (server.address() as net.AddressInfo).port,
        close: () => new Promise((done) => server.close(() => done()))
      }))
  })
