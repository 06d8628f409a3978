import * as net from "node:net"

/** A port nothing listens on right now (the caller binds it next). */
export const freePort = (host: string) =>
  new Promise<number>((resolve, reject) => {
    const server = net.createServer()
    server.once("error", reject)
    server.listen(0, host, () => {
      const address = server.address()
      server.close(() => resolve(typeof address === "object" && address !== null ? address.port : 0))
    })
  })
