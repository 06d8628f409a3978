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

/**
 * How long an idle keep-alive connection is kept. Node runs an expired keep-alive timer before it reads a request
 * already waiting on that socket, so with its default 5 s an event loop held longer than that (a long synchronous
 * statement at load) closed connections under requests the clients had just sent. Longer than a load balancer's
 * usual 60 s idle timeout, so the proxy, not this server, ends an idle connection it holds.
 */
export const KEEP_ALIVE_MS = 65_000

/**
 * Answers a request before the HTTP app sees it, or declines (false: the app answers it). Set once the
 * services it needs are up (fast-reads/); unset, every request goes to the app.
 */
export interface RequestGate {
  answer: ((request: http.IncomingMessage, response: http.ServerResponse) => boolean) | undefined
  /** Told of an exception `answer` threw (see `gated`). */
  failed?: ((error: unknown) => void) | undefined
}

/**
 * The gate's verdict. `answer` runs inside node's parser callback, where an exception would be an
 * uncaught exception (the process dies): it is reported instead, and the app answers the request,
 * unless the gate had begun its own answer (then only closing the connection is left).
 */
const gated = (gate: RequestGate, request: http.IncomingMessage, response: http.ServerResponse): boolean => {
  try {
    return gate.answer?.(request, response) === true
  } catch (error) {
    gate.failed?.(error)
    if (!response.headersSent) return false
    response.destroy()
    return true
  }
}

export interface DrainOptions {
  readonly closeDelayMs?: number | undefined
  readonly onClosing?: (() => void) | undefined
  readonly gate?: RequestGate | undefined
}

export const drainingServer = (drainMs: number = DRAIN_MS, options: DrainOptions = {}) => (): http.Server => {
  const server = http.createServer({ keepAliveTimeout: KEEP_ALIVE_MS })
  let closing = false
  const inFlight = new Set<http.ServerResponse>()
  const lastOnConnection = (response: http.ServerResponse) => {
    if (!response.headersSent) response.setHeader("connection", "close")
  }
  // Before the HTTP layer's own listener, so it runs before any handler answers; a request the gate
  // answers never reaches that listener. While closing, every request goes to the app.
  const emit = server.emit.bind(server) as (event: string, ...args: Array<unknown>) => boolean
  server.emit = ((event: string, ...args: Array<unknown>) => {
    if (event !== "request") return emit(event, ...args)
    const request = args[0] as http.IncomingMessage
    const response = args[1] as http.ServerResponse
    if (closing) {
      lastOnConnection(response)
      return emit(event, ...args)
    }
    // A request the gate answered has its whole answer begun (headers sent): nothing for the stop to
    // mark, so it is not tracked (no Set entry, no close listener per hot read).
    if (options.gate !== undefined && gated(options.gate, request, response)) return true
    inFlight.add(response)
    response.once("close", () => inFlight.delete(response))
    return emit(event, ...args)
  }) as typeof server.emit
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
