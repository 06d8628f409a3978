/**
 * The node:http server Grove listens with, made to stop quickly under keep-alive load. Node's
 * `server.close()` waits for every connection to end, and a keep-alive client that keeps sending
 * requests keeps its connection busy: a SIGTERM took over 20 s. Once closing, this server closes
 * idle keep-alive connections at once, answers every request still in flight or arriving with
 * `Connection: close` (the client does not reuse the connection, which closes after its response),
 * and closes whatever is still open after `drainMs` (long streams).
 *
 * With `closeDelayMs` (`--shutdown-delay-ms`) the listener stays open that long after the stop began,
 * every response saying `Connection: close`, so a load balancer that sees the node unready (`/readyz`,
 * told by `onClosing`) stops sending before new connections are refused.
 */
import * as http from "node:http"

/** Connections still open this long after the stop began are closed. */
export const DRAIN_MS = 5_000

export interface DrainOptions {
  readonly closeDelayMs?: number | undefined
  readonly onClosing?: (() => void) | undefined
}

export const drainingServer = (drainMs: number = DRAIN_MS, options: DrainOptions = {}) => (): http.Server => {
  const server = http.createServer()
  let closing = false
  const inFlight = new Set<http.ServerResponse>()
  const lastOnConnection = (response: http.ServerResponse) => {
    if (!response.headersSent) response.setHeader("connection", "close")
  }
  // Registered before the HTTP layer's own listener, so it runs before any handler answers.
  server.on("request", (_request, response) => {
    if (closing) return lastOnConnection(response)
    inFlight.add(response)
    response.once("close", () => inFlight.delete(response))
  })
  const close = server.close.bind(server)
  const stop = (callback?: (error?: Error) => void) => {
    for (const response of inFlight) lastOnConnection(response)
    setTimeout(() => server.closeAllConnections(), drainMs).unref()
    close(callback)
    server.closeIdleConnections()
  }
  server.close = ((callback?: (error?: Error) => void) => {
    if (closing) {
      close(callback)
      return server
    }
    closing = true
    options.onClosing?.()
    const delay = options.closeDelayMs ?? 0
    if (delay > 0) setTimeout(() => stop(callback), delay)
    else stop(callback)
    return server
  }) as typeof server.close
  return server
}
