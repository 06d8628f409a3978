/**
 * Routes the public Oak client calls that Grove does not provide (nor does the client's own
 * reference server): each answers, on purpose, the error the client handles best (read from its
 * source, oakvcs-cli 0.109.0), instead of whatever the router would say by accident (a 405 from
 * `/api/{owner}/{name}`, or a generic 404 the client reports as a failure).
 *
 * - `…/branches/{b}/findings[/…]` (`oak findings`): 404 with the error `Not found`, which the client
 *   turns into "review findings are not enabled for this repository".
 * - `POST /api/feature-requests/cli` (`oak feedback`): 404 saying where feedback goes instead; the
 *   client prints the error and exits 1 (any refusal does). The admin links API under
 *   `/api/feedback` stays the quiet 404 the client reports as "not authorized (or unknown item)".
 * - `GET /api/user/preferences` (`oak watch`, `oak config`): 404, read as "no server preference".
 * - `POST …/branches/{b}/activity` (`oak watch`'s heartbeat): 404, read as "unsupported": the
 *   daemon asks again in ten minutes and otherwise works as usual.
 *
 * None of them reads the request: the answer is the same for every caller and every repository,
 * so it tells nobody whether a repository exists.
 */
import { Effect } from "effect"
import { HttpRouter, HttpServerResponse } from "effect/http"

const notProvided = (error: string, code: string) =>
  Effect.succeed(HttpServerResponse.jsonUnsafe({ error, code }, { status: 404 }))

const METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"] as const

const findings = notProvided("Not found", "findings_not_supported")

/** Each route with its answer; `Methods.ts` reads the methods and paths for its checks before routing. */
export const OAK_CLIENT_ROUTES: ReadonlyArray<
  readonly [method: (typeof METHODS)[number], path: `/${string}`, answer: Effect.Effect<HttpServerResponse.HttpServerResponse>]
> = [
  // `…/findings/*` also routes `…/findings` itself.
  ...METHODS.map((method) => [method, "/api/:owner/:name/branches/:branch/findings/*", findings] as const),
  ["POST", "/api/feature-requests/cli", notProvided(
    "this Grove server does not collect Oak client feedback: tell the people who run it, or the Oak project",
    "feedback_not_supported"
  )],
  ["GET", "/api/user/preferences", notProvided("this server keeps no agent-sync preferences", "preferences_not_supported")],
  ["POST", "/api/:owner/:name/branches/:branch/activity", notProvided("this server does not track branch activity", "activity_not_supported")]
]

export const OakClientRoutes = HttpRouter.addAll(OAK_CLIENT_ROUTES.map(([method, path, answer]) => HttpRouter.route(method, path, answer)))
