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

/** Why `host:port` cannot be listened on now (EADDRINUSE, EACCES, ...), or undefined when it can. */
export const listenProblem = (host: string, port: number) =>
  new Promise<NodeJS.ErrnoException | undefined>((resolve) => {
    const server = net.createServer()
    server.once("error", (error) => resolve(error))
    server.listen(port, host, () => server.close(() => resolve(undefined)))
  })
