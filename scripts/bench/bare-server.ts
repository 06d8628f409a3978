/**
 * The benchmark baseline: a bare `node:http` server answering one fixed JSON
 * body (given as argv[2]) on every request. Prints its port.
 */
import * as http from "node:http"

const body = Buffer.from(process.argv[2] ?? "{}")
const server = http.createServer((_req, res) => {
  res.writeHead(200, { "content-type": "application/json", "content-length": body.length })
  res.end(body)
})
server.listen(0, "127.0.0.1", () => {
  const address = server.address()
  process.stdout.write(`listening on http://127.0.0.1:${typeof address === "object" && address ? address.port : 0}\n`)
})
process.on("SIGTERM", () => server.close(() => process.exit(0)))
