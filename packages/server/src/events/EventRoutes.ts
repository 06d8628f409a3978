/**
 * `GET /api/{owner}/{name}/events[?branches=main,b]`: the repository's events as server-sent
 * events, live, for `oak watch` and any other client: `event: branch` with `{kind, branch, commit,
 * actor, timestamp}` for each push, branch.created and merge (only of the listed branches, and
 * every merge, when `branches` is given), `event: lag` when this connection missed events (it fell
 * too far behind: the client re-reads what it watches), and `event: ping` every 15 s. Read access to
 * the repository is needed. Any node serves it: each follows the events topic.
 *
 * Access is checked again, with the caches just cleared, at every access event (a key revoked, a
 * membership, group or visibility changed, the repository deleted or moved: on any node), after a
 * gap in the feed (an access event may be among those dropped), and every minute (expired keys, a
 * missed event). When the caller may no longer read the repository the stream sends
 * `event: closed` with `{reason: "key_revoked" | "access_revoked"}` and ends, before any later event.
 *
 * Open streams are capped per caller (a user, a service account, an anonymous client's address)
 * and per node: past either, 429 `{error, code: "too_many_streams"}` with Retry-After. A stream's
 * slot is given back when it ends, the client disconnecting included.
 */
import { ApiErrors, ApiParams, type Caller } from "@grove/api"
import { Effect, Layer, Option, PubSub, Stream } from "effect"
import { HttpServerRequest, HttpServerResponse } from "effect/http"
import { Authorizer } from "../access/Authorizer.ts"
import { callerOf } from "../http/Authentication.ts"
import { dbUnavailable } from "../http/Failures.ts"
import { routeParams } from "../http/PathParams.ts"
import { answer, routeRepository } from "../http/RawRoutes.ts"
import { addBehindProxies } from "../http/TrustedProxies.ts"
import { Identity } from "../access/Identity.ts"
import type { RepositoryEvent } from "./RepositoryEvent.ts"
import { RepositoryEventStream, type SequencedEvent } from "./RepositoryEventStream.ts"

const eventsParams = routeParams(ApiParams.OwnerRepo)
const sse = (event: string, data: unknown) => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`
const PING = "event: ping\ndata: {}\n\n"
/** Seconds a refused client is asked to wait: streams of others end all the time, this caller's when it closes one. */
const RETRY_AFTER_SECONDS = 30

/** Why a stream was closed: the caller's key no longer authenticates, or it may no longer read the repository. */
export type CloseReason = "key_revoked" | "access_revoked"

const branchEvent = (event: RepositoryEvent) =>
  sse("branch", {
    kind: event.type,
    branch: event.branch ?? null,
    commit: event.commit ?? null,
    actor: event.pusher ?? null,
    timestamp: event.timestamp ?? null
  })

export const closedFrame = (reason: CloseReason) =>
  sse("closed", {
    reason,
    error: reason === "key_revoked"
      ? "the stream's key is no longer valid"
      : "the caller may no longer read this repository"
  })

/** What a stream reacts to: the node's feed, a ping due, a periodic re-check due. */
export type StreamInput = SequencedEvent | { readonly tick: "ping" | "recheck" }

/**
 * The frames of one connection: its events; `lag` once before the first item after a gap in the
 * node's sequence (items dropped while this connection lagged, whichever repository they were of);
 * pings. At an access event, after a gap and at a periodic tick it runs `recheck` first: a reason
 * there emits `closed` as the last frame (the caller of this cuts the stream after it).
 */
export const framesOf = <R>(wanted: (event: RepositoryEvent) => boolean, recheck: Effect.Effect<CloseReason | undefined, never, R>) =>
  Stream.mapAccumEffect(() => 0, (last: number, input: StreamInput) =>
    Effect.gen(function*() {
      if ("tick" in input && input.tick === "ping") return [last, [PING]] as const
      const seq = "seq" in input ? input.seq : last
      const lagged = "seq" in input && last !== 0 && seq > last + 1
      const lag = lagged ? [sse("lag", {})] : []
      if (lagged || "access" in input || "tick" in input) {
        const reason = yield* recheck
        if (reason !== undefined) return [seq, [...lag, closedFrame(reason)]] as const
      }
      const frames = "event" in input && wanted(input.event) ? [branchEvent(input.event)] : []
      return [seq, [...lag, ...frames]] as const
    }))

const isClosed = (frame: string) => frame.startsWith("event: closed\n")

/** Whose slot a stream takes: the principal's, or the client address's for anonymous callers. */
const callerKey = (caller: Caller, request: HttpServerRequest.HttpServerRequest): string => {
  const { principal } = caller
  if (principal.kind === "user") return `user:${principal.userId}`
  if (principal.kind === "service_account") return `service_account:${principal.accountId}`
  return `address:${Option.getOrElse(request.remoteAddress, () => "unknown")}`
}

const tooManyStreams = (error: string) =>
  HttpServerResponse.jsonUnsafe({ error, code: "too_many_streams" }, {
    status: 429,
    headers: { "retry-after": String(RETRY_AFTER_SECONDS) }
  })

const handleEvents = answer(Effect.gen(function*() {
  const params = yield* eventsParams
  const { pubsub, recheckMs, slots } = yield* RepositoryEventStream
  // Subscribed before access is checked: an access change after the check is in the feed.
  const subscription = yield* PubSub.subscribe(pubsub)
  const { repo, caller } = yield* routeRepository("read")
  const request = yield* HttpServerRequest.HttpServerRequest
  const key = callerKey(caller, request)
  // Taken for the request's scope, which closes when the response ends: written out, failed, or the client gone.
  const taken = yield* Effect.acquireRelease(
    Effect.sync(() => slots.take(key)),
    (ok) => ok ? Effect.sync(() => slots.give(key)) : Effect.void
  )
  if (!taken) {
    return tooManyStreams(
      slots.open(key) > 0
        ? "too many event streams open for this caller: close one or wait"
        : "too many event streams open on this server: try again later"
    )
  }
  const identity = yield* Identity
  const authorizer = yield* Authorizer
  const authorization = request.headers["authorization"]
  // Fresh: the access caches are cleared before an access event reaches the stream.
  const recheck: Effect.Effect<CloseReason | undefined> = callerOf(identity, authorization).pipe(
    Effect.mapError((error) => error instanceof ApiErrors.Unauthorized ? "key_revoked" as const : error),
    Effect.flatMap((who) => dbUnavailable(authorizer.repository(who, params.owner, params.name, "read"))),
    // The same name now for another repository (deleted and created again, moved) is not what was authorized.
    Effect.map((now): CloseReason | undefined => now.id === repo.id ? undefined : "access_revoked"),
    Effect.catch((error): Effect.Effect<CloseReason | undefined> => {
      if (error === "key_revoked") return Effect.succeed("key_revoked")
      if (error instanceof ApiErrors.ServiceUnavailable) {
        // The database is down: keep the stream, the next re-check decides.
        return Effect.logWarning("could not re-check an event stream's access", error).pipe(Effect.as(undefined))
      }
      return Effect.succeed("access_revoked")
    })
  )
  const listed = new URL(request.url, "http://grove").searchParams.get("branches")
  const branches = listed === null ? undefined : new Set(listed.split(",").map((b) => b.trim()).filter((b) => b.length > 0))
  const wanted = (event: RepositoryEvent) =>
    event.repository_id === repo.id && (branches === undefined || event.type === "merge" || branches.has(event.branch ?? ""))
  const sources: ReadonlyArray<Stream.Stream<StreamInput>> = [
    Stream.fromSubscription(subscription),
    Stream.tick("15 seconds").pipe(Stream.map(() => ({ tick: "ping" as const }))),
    Stream.tick(recheckMs).pipe(Stream.drop(1), Stream.map(() => ({ tick: "recheck" as const })))
  ]
  const inputs = Stream.mergeAll(sources, { concurrency: "unbounded" })
  const live = inputs.pipe(framesOf(wanted, recheck), Stream.takeUntil(isClosed))
  const body = Stream.concat(Stream.make(": connected\n\n"), live).pipe(Stream.encodeText)
  return HttpServerResponse.stream(body, {
    contentType: "text/event-stream",
    headers: { "cache-control": "no-store", "x-accel-buffering": "no" }
  })
}))

/**
 * Behind trusted proxies an anonymous client's address is the one they name in `X-Forwarded-For`
 * (as for the sign-in throttle; http/TrustedProxies.ts); from any other peer that header is ignored.
 */
const events = addBehindProxies("GET", "/api/:owner/:name/events", handleEvents)

export const EventRoutes = Layer.mergeAll(events)
