/**
 * A streamed answer (a clone's chunks/fetch) from an http:// server over a plain socket: every network read lands in
 * one buffer the socket reuses (net's `onread`) and goes to the consumer as a view of it, with no http parser, stream
 * or new ArrayBuffer per read in between. For a clone's 52 MB in a one-shot process, node:http's way costs ~100 ms
 * more CPU (~120 against ~22 ms, reading alone): its parser and streams, and the collections its ~50 MB of per-read
 * buffers set off. https, a proxy node may use, and GROVE_STREAM_SOCKET=0 go through node:http (HttpSend.sendBytes).
 *
 * The request, its bounds and its errors are sendBytes' (same codes and messages, `connected` on every error), one
 * connection per request (`connection: close`). A part is the consumer's until it returns, or until the promise it
 * returns settles (the socket is paused meanwhile, so nothing is read into the buffer): a consumer that keeps a part
 * longer copies it.
 */
import type * as Net from "node:net"
import type { Answer, SendInit } from "./HttpSend.ts"
import { failure, MAX_ANSWER_BYTES, processTimeouts, seconds, wentSilent } from "./HttpSend.ts"

/** What one read may bring (node reads 64 KiB at a time into a new buffer each). */
const READ_BYTES = 256 * 1024
/** An answer's status line and headers may take this much. */
const MAX_HEAD = 64 * 1024


/**
 * Whether node may send http:// requests through a proxy (Node 24's NODE_USE_ENV_PROXY or --use-env-proxy, given on
 * the command line or in NODE_OPTIONS, which execArgv does not list, with HTTP_PROXY set).
 */
const proxied = (env: Readonly<Record<string, string | undefined>>, execArgv: ReadonlyArray<string>): boolean =>
  (env["NODE_USE_ENV_PROXY"] === "1" || execArgv.includes("--use-env-proxy") || (env["NODE_OPTIONS"] ?? "").split(/\s+/).includes("--use-env-proxy")) &&
  (env["HTTP_PROXY"] ?? env["http_proxy"] ?? "") !== ""

/**
 * Whether `sendStreamed` takes a streamed request to `url` (else HttpSend.sendBytes does): not where node may go
 * through a proxy (the socket connects directly), nor with GROVE_STREAM_SOCKET=0.
 */
export const streamsOverSocket = (
  url: string,
  env: Readonly<Record<string, string | undefined>> = process.env,
  execArgv: ReadonlyArray<string> = process.execArgv
): boolean => url.startsWith("http://") && env["GROVE_STREAM_SOCKET"] !== "0" && !proxied(env, execArgv)

/** The answer's status and headers from its head (the text before the blank line). */
const parseHead = (text: string): { readonly status: number; readonly headers: Record<string, string> } | undefined => {
  const lines = text.split("\r\n")
  const status = /^HTTP\/1\.[01] (\d{3})/.exec(lines[0]!)
  if (status === null) return undefined
  const headers: Record<string, string> = {}
  for (const line of lines.slice(1)) {
    const colon = line.indexOf(":")
    if (colon <= 0) return undefined
    const name = line.slice(0, colon).trim().toLowerCase()
    const value = line.slice(colon + 1).trim()
    headers[name] = headers[name] === undefined ? value : `${headers[name]}, ${value}`
  }
  return { status: Number(status[1]), headers }
}

/** The request's head; a header value with a line break in it is refused (it would split the request). */
const requestHead = (target: URL, init: SendInit, bodyLength: number): string => {
  let head = `${init.method} ${target.pathname}${target.search} HTTP/1.1\r\nhost: ${target.host}\r\nconnection: close\r\n`
  for (const [name, value] of Object.entries(init.headers ?? {})) {
    if (/[\r\n]/.test(name) || /[\r\n]/.test(value)) throw failure(`a request header holds a line break: ${name}`, "ERR_INVALID_CHAR")
    const lower = name.toLowerCase()
    if (lower === "host" || lower === "connection" || lower === "content-length") continue
    head += `${name}: ${value}\r\n`
  }
  return `${head}content-length: ${bodyLength}\r\n\r\n`
}

/** As HttpSend.sendBytes for a request whose answer `init.stream` takes (read whole when it takes none), to an http:// url. */
export const sendStreamed = (url: string, init: SendInit): Promise<Answer> =>
  new Promise<Answer>((resolveWith, rejectWith) => {
    const net = process.getBuiltinModule("node:net") as typeof Net
    const target = new URL(url)
    const timeouts = init.idleTimeoutMs === undefined || init.connectTimeoutMs === undefined ? processTimeouts() : undefined
    const idleMs = init.idleTimeoutMs ?? timeouts!.idleMs
    const connectMs = init.connectTimeoutMs ?? timeouts!.connectMs
    const maxBytes = init.maxBytes ?? MAX_ANSWER_BYTES
    const body = init.body === undefined ? Buffer.alloc(0) : typeof init.body === "string" ? Buffer.from(init.body) : init.body
    let connected = false
    let settled = false
    const reject = (error: unknown) => {
      if (settled) return
      settled = true
      rejectWith(typeof error === "object" && error !== null ? Object.assign(error, { connected }) : error)
    }
    let head: string
    try {
      head = requestHead(target, init, body.length)
    } catch (error) {
      return reject(error)
    }

    /** Where the answer is: its head, a chunk-size line, a chunk's data, the line break after it, the trailers, or a plain body. */
    let phase: "head" | "size" | "data" | "data-end" | "trailer" | "length" | "close" = "head"
    let headText = ""
    let line = ""
    let left = 0
    let received = 0
    let status = 0
    let headers: Record<string, string> = {}
    let consumer: ReturnType<NonNullable<SendInit["stream"]>>
    const whole: Array<Buffer> = []
    /** The read being taken: a view of the socket's buffer, and how far it is taken. */
    let view: Buffer = Buffer.alloc(0)
    let at = 0
    /** A part's promise is pending: the socket is paused and `view` stays as it is until it settles. */
    let waiting = false
    /** The whole body has come (it is taken once no part is pending). */
    let ended = false

    const stop = (error: unknown) => {
      reject(error)
      socket.destroy()
    }
    const finish = () => {
      if (settled) return
      socket.destroy()
      try {
        consumer?.done()
      } catch (error) {
        return reject(error)
      }
      settled = true
      resolveWith({ status, headers, body: consumer !== undefined ? new Uint8Array(0) : whole.length === 1 ? whole[0]! : Buffer.concat(whole) })
    }
    /** Hands a piece of the body over; a pending promise pauses the answer (`waiting`) until it settles. */
    const deliver = (piece: Buffer) => {
      received += piece.length
      if (received > maxBytes) throw failure(`the server's answer is larger than ${maxBytes} bytes`, "ERR_ANSWER_TOO_LARGE")
      if (consumer === undefined) return void whole.push(Buffer.from(piece))
      const wait = consumer.part(piece)
      if (wait === undefined) return
      waiting = true
      // The consumer's time (a slow disk) is not the server's silence.
      socket.setTimeout(0)
      wait.then(() => {
        waiting = false
        if (settled) return
        if (idleMs > 0) socket.setTimeout(idleMs)
        take()
        if (!waiting && !settled) socket.resume()
      }, stop)
    }
    /** Takes the current read from `at` on, until it is used up, a part is pending or the answer ends. */
    const take = () => {
      try {
        while (at < view.length && !waiting && !ended) {
          switch (phase) {
            case "head": {
              const before = headText.length
              headText += view.toString("latin1", at, Math.min(view.length, at + MAX_HEAD))
              // The blank line may straddle two reads.
              const end = headText.indexOf("\r\n\r\n", Math.max(0, before - 3))
              if (end === -1) {
                if (headText.length > MAX_HEAD) throw failure("the server's answer has too long a head", "HPE_HEADER_OVERFLOW")
                at = view.length
                continue
              }
              at += end + 4 - before
              const parsed = parseHead(headText.slice(0, end))
              headText = ""
              if (parsed === undefined) throw failure("the server sent an answer that is not HTTP/1.1", "HPE_INVALID_CONSTANT")
              // 1xx: the answer follows.
              if (parsed.status < 200) continue
              status = parsed.status
              headers = parsed.headers
              const encoding = (headers["content-encoding"] ?? "identity").trim().toLowerCase()
              if (encoding !== "identity" && encoding !== "") throw new Error(`unsupported content-encoding ${encoding}`)
              consumer = init.stream?.(status, headers)
              if (/(?:^|,)\s*chunked\s*$/i.test(headers["transfer-encoding"] ?? "")) phase = "size"
              else if (headers["content-length"] !== undefined) {
                left = Number(headers["content-length"])
                if (!Number.isSafeInteger(left) || left < 0) throw failure("the server's answer has a bad content-length", "HPE_INVALID_CONTENT_LENGTH")
                phase = "length"
                ended = left === 0
              } else phase = "close"
              continue
            }
            case "size":
            case "trailer": {
              const end = view.indexOf(10, at)
              line += view.toString("latin1", at, end === -1 ? view.length : end)
              if (line.length > 1024) throw failure("the server's answer has a bad chunk", "HPE_INVALID_CHUNK_SIZE")
              if (end === -1) {
                at = view.length
                continue
              }
              at = end + 1
              const text = line.endsWith("\r") ? line.slice(0, -1) : line
              line = ""
              if (phase === "trailer") {
                ended = text === ""
                continue
              }
              const size = /^[0-9a-fA-F]+/.exec(text)
              if (size === null) throw failure("the server's answer has a bad chunk", "HPE_INVALID_CHUNK_SIZE")
              left = Number.parseInt(size[0], 16)
              phase = left === 0 ? "trailer" : "data"
              continue
            }
            case "data":
            case "length": {
              const count = Math.min(left, view.length - at)
              const piece = view.subarray(at, at + count)
              at += count
              left -= count
              if (left === 0) {
                if (phase === "length") ended = true
                else phase = "data-end"
              }
              deliver(piece)
              continue
            }
            case "data-end": {
              // The line break after a chunk's data.
              if (view[at] === 10) phase = "size"
              at++
              continue
            }
            case "close": {
              const piece = view.subarray(at)
              at = view.length
              deliver(piece)
              continue
            }
          }
        }
        if (ended && !waiting) finish()
      } catch (error) {
        stop(error)
      }
    }

    const socket = net.connect({
      host: target.hostname.replace(/^\[(.*)\]$/, "$1"),
      port: Number(target.port || 80),
      onread: {
        buffer: Buffer.allocUnsafe(READ_BYTES),
        callback: (bytes: number, buffer: Uint8Array) => {
          view = Buffer.from(buffer.buffer, buffer.byteOffset, bytes)
          at = 0
          take()
          // Paused until the pending part settles (then the rest of this read is taken first).
          if (waiting) return false
          // A full buffer: libuv would read again at once (up to 32 times, 8 MiB taken in one go per socket), and a
          // signal (Ctrl-C: the abort that destroys this socket) waits for the next turn of the loop. Go on after it.
          if (bytes < READ_BYTES || settled) return true
          setImmediate(() => {
            if (!waiting && !settled) socket.resume()
          })
          return false
        }
      }
    })
    const connectTimer = connectMs > 0
      ? setTimeout(() =>
        stop(failure(`no connection after ${seconds(connectMs)} (set GROVE_CONNECT_TIMEOUT to wait longer)`, "ERR_CONNECT_TIMEOUT")), connectMs)
      : undefined
    socket.once("connect", () => {
      clearTimeout(connectTimer)
      connected = true
      socket.write(head, "latin1")
      socket.write(body)
    })
    if (idleMs > 0) {
      socket.setTimeout(idleMs)
      socket.on("timeout", () => stop(wentSilent(idleMs)))
    }
    socket.on("error", (error) => reject(error))
    socket.once("close", () => {
      clearTimeout(connectTimer)
      if (settled || ended) return
      // A body that runs until the connection closes has ended (taken once no part is pending); anything else was cut short.
      if (phase === "close") {
        ended = true
        if (!waiting) finish()
        return
      }
      reject(
        phase === "head" && received === 0 && status === 0
          ? failure("the server closed the connection without answering", "ECONNRESET")
          : failure(`the connection broke within the server's answer, ${received} bytes in`, "ECONNRESET")
      )
    })
    const signal = init.signal
    if (signal !== undefined) {
      const abort = () => stop(Object.assign(new Error("The operation was aborted"), { name: "AbortError", code: "ABORT_ERR" }))
      if (signal.aborted) return abort()
      signal.addEventListener("abort", abort, { once: true })
      socket.once("close", () => signal.removeEventListener("abort", abort))
    }
  })
