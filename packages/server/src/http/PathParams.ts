/**
 * Path parameters are checked at the edge, before the token lookup and before any query, with
 * the one schema per kind in `@grove/api` Params: a NUL, another control character or an
 * overlong value answers `400 {error, code: "invalid_input"}` on every route, JSON API and raw
 * routes alike, and never reaches the database.
 */
import { ApiErrors } from "@grove/api"
import { Effect, Schema, SchemaIssue } from "effect"
import { HttpRouter } from "effect/http"

const formatter = SchemaIssue.makeFormatterStandardSchemaV1()

/** The 400 for path parameters that failed their schema, naming the parameter and the rule; the value is never echoed. */
export const invalidParams = (error: Schema.SchemaError): ApiErrors.BadRequest => {
  const first = formatter(error.issue).issues[0]
  const segment = first?.path?.[0]
  const name = typeof segment === "object" && segment !== null ? segment.key : segment
  const what = name === undefined ? "invalid path" : `invalid path parameter '${String(name)}'`
  return new ApiErrors.BadRequest({ error: `${what}: ${first?.message ?? "malformed"}`, code: "invalid_input" })
}

type Decoder = (input: unknown) => Effect.Effect<unknown, Schema.SchemaError>
const decoders = new WeakMap<Schema.Top, Decoder>()

const decoderOf = (schema: Schema.Top): Decoder => {
  let decoder = decoders.get(schema)
  if (decoder === undefined) {
    decoder = Schema.decodeUnknownEffect(schema as Schema.Codec<unknown, unknown>) as Decoder
    decoders.set(schema, decoder)
  }
  return decoder
}

/** Checks the current route's parameters against `schema` (a struct of Params kinds). */
export const checkRouteParams = (schema: Schema.Top): Effect.Effect<void, ApiErrors.BadRequest, HttpRouter.RouteContext> =>
  HttpRouter.params.pipe(
    Effect.flatMap((params) => decoderOf(schema)(params)),
    Effect.mapError(invalidParams),
    Effect.asVoid
  )

/** For the raw routes: the route's parameters, checked, by the fields each route declares. */
export const routeParams = <const Fields extends Schema.Struct.Fields>(fields: Fields) => {
  const schema = Schema.Struct(fields)
  return HttpRouter.params.pipe(
    Effect.flatMap((params) => decoderOf(schema)(params) as Effect.Effect<Schema.Struct.Type<Fields>, Schema.SchemaError>),
    Effect.mapError(invalidParams)
  )
}
