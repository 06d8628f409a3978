/**
 * The typed client, derived from the api package's `GroveApi`, and the
 * translation of everything it can fail with into a `CliFailure` with the
 * right exit code. Writes answered with 202 `OperationPending` are polled.
 */
import type { GroveApi } from "@grove/api/Api"
import { groveShape } from "@grove/api/ApiShape"
import * as ApiErrors from "@grove/api/Errors"
import { ApiKeysGroup, CliAuthGroup, ReposGroup, SystemGroup } from "@grove/api/Groups"
import { BranchesGroup, ContentGroup, SyncGroup } from "@grove/api/SyncGroups"
import { Context, Duration, Effect, Option, Schedule, Schema } from "effect"
import { HttpClient, HttpClientError, HttpClientRequest } from "effect/http"
import type { HttpApiGroup } from "effect/http-api"
import { HttpApi, HttpApiClient } from "effect/http-api"
import type { Credential, Resolution } from "./CredentialResolver.ts"
import { describeSource, resolveCredential } from "./CredentialResolver.ts"
import { CliFailure, ExitCode, networkFailure } from "./Failures.ts"
import { retryUntaken } from "./Retry.ts"
import { ACCEPT_ENCODING, downloadCompression, squeezeBody } from "./sync/BodyCompression.ts"
import { nodeHttpClient } from "./sync/HttpTransport.ts"

/**
 * The `Idempotency-Key` header of the requests made while it is set (`Effect.provideService`): a
 * retried merge, sync or revert with the same key replays the first answer instead of acting twice.
 */
export const IdempotencyKey = Context.Reference<string | undefined>("grove/cli/IdempotencyKey", {
  defaultValue: () => undefined
})

const withIdempotencyKey = (request: HttpClientRequest.HttpClientRequest) =>
  Effect.map(IdempotencyKey, (key) => key === undefined ? request : HttpClientRequest.setHeader(request, "idempotency-key", key))

/**
 * While set (`Effect.provideService`), a request of the typed client waits for this effect once it is built, its body
 * encoded and compressed, and goes when it ends: a push's body is made while its chunk batches upload and sent the
 * moment they are done (commands/Push.ts). Retries of a request that went do not wait again.
 */
export const SendGate = Context.Reference<Effect.Effect<void> | undefined>("grove/cli/SendGate", {
  defaultValue: () => undefined
})

const afterGate = (request: HttpClientRequest.HttpClientRequest) =>
  Effect.flatMap(SendGate, (gate) => gate === undefined ? Effect.succeed(request) : Effect.as(gate, request))

/**
 * The typed client's request mapping: large JSON bodies go zstd-compressed to a server that takes them,
 * and every request accepts zstd answers, unless answers come plain (`downloadCompression`: a server on this machine).
 */
export const compressRequest = (site: string, token: string | undefined) => (request: HttpClientRequest.HttpClientRequest) =>
  Effect.promise(async () => {
    const accepting = downloadCompression(site) ? HttpClientRequest.setHeader(request, "accept-encoding", ACCEPT_ENCODING) : request
    const body = request.body
    const compressed = body._tag === "Uint8Array" ? await squeezeBody(site, token, body.body) : undefined
    if (compressed === undefined || body._tag !== "Uint8Array") return accepting
    return HttpClientRequest.setHeader(HttpClientRequest.bodyUint8Array(accepting, compressed, body.contentType), "content-encoding", "zstd")
  })

type GroveGroups = typeof GroveApi extends HttpApi.HttpApi<string, infer Groups> ? Groups : never
export type GroveClient = HttpApiClient.Client<GroveGroups>
type GroupName = HttpApiGroup.Identifier<GroveGroups>

/** A group's definition, or (`later`) how to load its module. */
type Definition = HttpApiGroup.Constraint | { readonly load: () => Promise<HttpApiGroup.Constraint> }
const later = (load: () => Promise<HttpApiGroup.Constraint>): Definition => ({ load })

/**
 * Each group of `GroveApi`: the ones most commands call (a clone, a push, a pull: system, repos, api keys, sync,
 * branches) and their modules' neighbours as loaded, the others' modules only when a command first calls them:
 * evaluating every group's definition (HttpApiEndpoint.make of ~100 endpoints, and GroveApi's assembly) cost every
 * command that made a client ~13 ms of CPU. Client.test checks this lists exactly GroveApi's groups, each as GroveApi
 * serves it.
 */
export const groupDefinitions: { readonly [G in GroupName]: Definition } = {
  system: SystemGroup,
  apiKeys: ApiKeysGroup,
  cliAuth: CliAuthGroup,
  repos: ReposGroup,
  sync: SyncGroup,
  branches: BranchesGroup,
  content: ContentGroup,
  orgs: later(() => import("@grove/api/OrgGroups").then((m) => m.OrgsGroup)),
  stagedPush: later(() => import("@grove/api/StagedPushGroups").then((m) => m.StagedPushGroup)),
  integrity: later(() => import("@grove/api/IntegrityGroups").then((m) => m.IntegrityGroup)),
  merges: later(() => import("@grove/api/MergeGroups").then((m) => m.MergesGroup)),
  audit: later(() => import("@grove/api/AuditGroups").then((m) => m.AuditGroup)),
  serviceAccounts: later(() => import("@grove/api/ServiceAccountGroups").then((m) => m.ServiceAccountsGroup)),
  pathPermissions: later(() => import("@grove/api/PathPermissionGroups").then((m) => m.PathPermissionsGroup)),
  ci: later(() => import("@grove/api/CiGroups").then((m) => m.CiGroup)),
  webhooks: later(() => import("@grove/api/WebhookGroups").then((m) => m.WebhooksGroup))
}

/** One group's API as GroveApi serves it (ApiShape.ts), built from that group's definition alone. */
export const groupApi = (definition: HttpApiGroup.Constraint) => HttpApi.make("grove").add(definition).pipe(groveShape)

/**
 * The typed client. `Authentication` and `RequestValidation` are server-side middleware that are not
 * `requiredForClient`, so the client needs no middleware layer: the bearer token is added to every
 * request by the client's request mapping. Each API group's methods (their encoders and decoders) are built the first
 * time the command touches the group: building all of them took ~5% of a one-file push's CPU profile, and a command
 * uses one to four groups; the rarely called groups' definitions are loaded then too (`groupDefinitions`).
 */
export const makeClient = (remote: string, token: string | undefined): Effect.Effect<GroveClient> =>
  Effect.gen(function*() {
    const base = yield* HttpClient.HttpClient
    const httpClient = retryUntaken(HttpClient.mapRequestEffect(
      HttpClient.mapRequestEffect(
        HttpClient.mapRequestEffect(
          token === undefined ? base : HttpClient.mapRequest(base, HttpClientRequest.bearerToken(token)),
          withIdempotencyKey
        ),
        // Large bodies zstd to a server that takes them; zstd answers accepted (sync/BodyCompression.ts).
        compressRequest(remote, token)
      ),
      afterGate
    ))
    type Methods = Record<string, (...args: ReadonlyArray<unknown>) => Effect.Effect<unknown, unknown, unknown>>
    const client = {} as Record<string, unknown>
    for (const group of Object.keys(groupDefinitions) as Array<GroupName>) {
      const definition = groupDefinitions[group]
      // Synchronous: building a group only reads its schemas. The group alone, typed as in GroveApi (Client.test: the
      // same endpoints, paths and middlewares).
      const build = (of: HttpApiGroup.Constraint): Methods =>
        Effect.runSync(HttpApiClient.group(groupApi(of) as unknown as HttpApi.HttpApi<"grove", GroveGroups>, { group, httpClient, baseUrl: remote })) as never
      if (!("load" in definition)) {
        let built: Methods | undefined
        Object.defineProperty(client, group, { enumerable: true, get: () => built ??= build(definition) })
        continue
      }
      // A method is the group's own, reached through an effect that first waits for the group's module.
      let built: Promise<Methods> | undefined
      const methods = Effect.promise(() => built ??= definition.load().then(build))
      const endpoints = new Proxy({}, {
        get: (_, endpoint) =>
          typeof endpoint !== "string" || endpoint === "then"
            ? undefined
            : (...args: ReadonlyArray<unknown>) => Effect.flatMap(methods, (m) => m[endpoint]!(...args))
      })
      Object.defineProperty(client, group, { enumerable: true, value: endpoints })
    }
    return client as GroveClient
  }).pipe(Effect.provideService(HttpClient.HttpClient, nodeHttpClient)) // node:http, not fetch (sync/HttpTransport.ts)

/** The API errors by HTTP status, with the `code` used when the server gives none. */
const apiErrors = [
  [ApiErrors.BadRequest, 400, "bad_request"],
  [ApiErrors.Unauthorized, 401, "unauthorized"],
  [ApiErrors.Forbidden, 403, "forbidden"],
  [ApiErrors.NotFound, 404, "not_found"],
  [ApiErrors.Conflict, 409, "conflict"],
  [ApiErrors.PreconditionFailed, 412, "precondition_failed"],
  [ApiErrors.PayloadTooLarge, 413, "payload_too_large"],
  [ApiErrors.ServiceUnavailable, 503, "unavailable"],
  [ApiErrors.OperationPending, 202, "operation_pending"]
] as const

/** 401 means "sign in again" (6); every other answer of the server is a refusal (1). */
export const exitCodeForStatus = (status: number): ExitCode => status === 401 ? ExitCode.auth : ExitCode.error

interface ErrorBody {
  readonly error?: unknown
  readonly code?: unknown
  readonly [key: string]: unknown
}

/** What the client knows when it turns an error into a message. */
export interface CallContext {
  readonly remote: string
  readonly credential: Option.Option<Credential>
}

const hintFor = (status: number, context: CallContext): string => {
  if (status === 401) {
    return Option.match(context.credential, {
      onNone: () => ` (not signed in to ${context.remote}: run grove login)`,
      onSome: (credential) => ` (sent ${describeSource(credential)}; see grove auth status)`
    })
  }
  if (status === 404 && Option.isSome(context.credential) && context.credential.value.source === "checkout") {
    return ` (using ${describeSource(context.credential.value)}: a stale key can make a repository appear missing)`
  }
  return ""
}

/** A failure from a status and the spec's error body `{ error, code?, ... }`. */
export const fromErrorBody = (status: number, body: ErrorBody, context: CallContext): CliFailure => {
  const { code, error, ...rest } = body
  const known = apiErrors.find(([, s]) => s === status)
  const message = typeof error === "string" && error !== "" ? error : `the server answered HTTP ${status}`
  return new CliFailure({
    message: message + hintFor(status, context),
    exitCode: exitCodeForStatus(status),
    code: typeof code === "string" ? code : known?.[2] ?? `http_${status}`,
    details: { status, ...rest }
  })
}

const fromHttpClientError = (error: HttpClientError.HttpClientError, context: CallContext) =>
  Effect.gen(function*() {
    const response = error.response
    if (error.reason._tag === "TransportError" || response === undefined) return networkFailure(context.remote, error.reason.cause)
    // An undeclared status (500, a proxy's 502...) or a body that is not the spec's shape.
    const body = yield* response.json.pipe(Effect.orElseSucceed(() => undefined))
    const status = response.status
    if (status >= 200 && status < 300) {
      return new CliFailure({
        message: `unexpected answer from ${context.remote} (is it a Grove server of a compatible version?)`,
        exitCode: ExitCode.error,
        code: "bad_response"
      })
    }
    return fromErrorBody(status, typeof body === "object" && body !== null ? body as ErrorBody : {}, context)
  })

/** Any failure of a client call, as a `CliFailure`. */
export const toFailure = (error: unknown, context: CallContext): Effect.Effect<CliFailure> => {
  if (error instanceof CliFailure) return Effect.succeed(error)
  for (const [errorClass, status] of apiErrors) {
    if (error instanceof errorClass) {
      const { _tag, ...body } = error as unknown as ErrorBody & { readonly _tag: string }
      return Effect.succeed(fromErrorBody(status, body, context))
    }
  }
  if (HttpClientError.isHttpClientError(error)) return fromHttpClientError(error, context)
  if (Schema.isSchemaError(error)) {
    return Effect.succeed(
      new CliFailure({
        message: `unexpected answer from ${context.remote} (is it a Grove server of a compatible version?): ${error.message}`,
        exitCode: ExitCode.error,
        code: "bad_response"
      })
    )
  }
  return Effect.succeed(new CliFailure({ message: String(error), exitCode: ExitCode.error, code: "error" }))
}

export interface PollOptions {
  readonly attempts: number
  readonly interval: Duration.Input
}

const defaultPoll: PollOptions = { attempts: 5, interval: "1 second" }

/** A connection to one server with the credential the resolution chose. */
export interface Connection extends CallContext {
  readonly resolution: Resolution
  readonly client: GroveClient
  /** Runs a call, turning every failure into a `CliFailure`. */
  readonly call: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, CliFailure, R>
  /**
   * Runs a write. A 202 `OperationPending` is polled at `GET /operations/{id}`; the finished
   * operation's response is decoded with `success` (or failed with its error body).
   */
  readonly write: <A, E, R, S extends Schema.Top>(
    effect: Effect.Effect<A, E, R>,
    success: S,
    poll?: PollOptions
  ) => Effect.Effect<A | S["Type"], CliFailure, R | S["DecodingServices"]>
}

export const connectWith = (resolution: Resolution): Effect.Effect<Connection> =>
  Effect.gen(function*() {
    const context: CallContext = { remote: resolution.remote, credential: resolution.credential }
    const client = yield* makeClient(resolution.remote, Option.getOrUndefined(Option.map(resolution.credential, (c) => c.token)))
    const call = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
      Effect.catch(effect, (error) => Effect.flatMap(toFailure(error, context), Effect.fail))

    const awaitOperation = <S extends Schema.Top>(id: string, success: S, poll: PollOptions) =>
      Effect.gen(function*() {
        const operation = yield* call(client.system.operation({ params: { id } })).pipe(
          Effect.repeat({
            schedule: Schedule.spaced(poll.interval),
            times: poll.attempts - 1,
            while: (op) => op.status === "pending"
          })
        )
        if (operation.status === "pending" || operation.http_status === undefined) {
          return yield* new CliFailure({
            message: `the server is still working on it: operation ${id} (check ${resolution.remote}/api/operations/${id})`,
            exitCode: ExitCode.error,
            code: "operation_pending",
            details: { operation_id: id }
          })
        }
        const status = operation.http_status
        if (status < 200 || status >= 300) {
          const body = typeof operation.response === "object" && operation.response !== null ? operation.response : {}
          return yield* fromErrorBody(status, body as ErrorBody, context)
        }
        return yield* call(Schema.decodeUnknownEffect(success)(operation.response))
      })

    return {
      ...context,
      resolution,
      client,
      call,
      write: (effect, success, poll = defaultPoll) =>
        call(
          Effect.catchIf(
            effect,
            (error): error is ApiErrors.OperationPending & typeof error => error instanceof ApiErrors.OperationPending,
            (pending) => awaitOperation(pending.operation_id, success, poll)
          )
        )
    } satisfies Connection
  })

/** Resolves the credential for `remote` and connects with it. */
export const connect = Effect.fn("Client.connect")(function*(remote: string) {
  return yield* connectWith(yield* resolveCredential(remote))
})
