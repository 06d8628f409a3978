/**
 * `GET /api/{owner}/{name}/events[?branches=main,b]`: the repository's events as server-sent
 * events, live, for `oak watch` and any other client: `event: branch` with `{kind, branch, commit,
 * actor, timestamp}` for each push, branch.created and merge (only of the listed branches, and
 * every merge, when `branches` is given), `event: lag` when this connection missed events (it fell
 * too far behind: the client re-reads what it watches), and `event: ping` every 15 s. Read access to
 * the repository is needed. Any node serves it: each follows the events topic.
 */
import { ApiParams } from "@grove/api"
import { Effect, Layer, Stream } from "effect"
import { HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"
import { routeParams } from "../http/PathParams.ts"
import { answer, routeRepository } from "../http/RawRoutes.ts"
import type { RepositoryEvent } from "./RepositoryEvent.ts"
import { RepositoryEventStream, type SequencedEvent } from "./RepositoryEventStream.ts"

const eventsParams = routeParams(ApiParams.OwnerRepo)
const sse = (event: string, data: unknown) => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`

const branchEvent = (event: RepositoryEvent) =>
  sse("branch", {
    kind: event.type,
    branch: event.branch ?? null,
    commit: event.commit ?? null,
    actor: event.pusher ?? null,
    timestamp: event.timestamp ?? null
  })

/**
 * The frames of one connection: its events, and `lag` once before the first event after a gap in
 * the node's sequence (events dropped while this connection lagged, whichever repository they were of).
 */
export const framesOf = (wanted: (event: RepositoryEvent) => boolean) =>
  Stream.mapAccum(() => 0, (last: number, { event, seq }: SequencedEvent) => {
    const lagged = last !== 0 && seq > last + 1
    const frames = [...(lagged ? [sse("lag", {})] : []), ...(wanted(event) ? [branchEvent(event)] : [])]
    return [seq, frames] as const
  })

const events = HttpRouter.add("GET", "/api/:owner/:name/events", answer(Effect.gen(function*() {
  yield* eventsParams
  const { repo } = yield* routeRepository("read")
  const { pubsub } = yield* RepositoryEventStream
  const request = yield* HttpServerRequest.HttpServerRequest
  const listed = new URL(request.url, "http://grove").searchParams.get("branches")
  const branches = listed === null ? undefined : new Set(listed.split(",").map((b) => b.trim()).filter((b) => b.length > 0))
  const wanted = (event: RepositoryEvent) =>
    event.repository_id === repo.id && (branches === undefined || event.type === "merge" || branches.has(event.branch ?? ""))
  const live = Stream.fromPubSub(pubsub).pipe(framesOf(wanted))
  const pings = Stream.tick("15 seconds").pipe(Stream.map(() => "event: ping\ndata: {}\n\n"))
  const body = Stream.concat(Stream.make(": connected\n\n"), Stream.merge(live, pings)).pipe(Stream.encodeText)
  return HttpServerResponse.stream(body, {
    contentType: "text/event-stream",
    headers: { "cache-control": "no-store", "x-accel-buffering": "no" }
  })
})))

export const EventRoutes = Layer.mergeAll(events)
