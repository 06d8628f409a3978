/**
 * The admin operations behind `grove-server user ...`, shared by the admin
 * socket (server running) and the direct path (server stopped).
 */
import { Effect, Schema } from "effect"
import { Identity } from "../access/Identity.ts"

export const CreateUserRequest = Schema.Struct({
  username: Schema.String,
  admin: Schema.Boolean,
  password: Schema.optionalKey(Schema.String)
})
export const CreateUserResponse = Schema.Struct({ username: Schema.String, is_admin: Schema.Boolean, api_key: Schema.String })
export const SetPasswordRequest = Schema.Struct({ username: Schema.String, password: Schema.String })

export class AdminFailure extends Schema.TaggedError<AdminFailure>()("AdminFailure", {
  message: Schema.String,
  status: Schema.Number
}) {}

export const createUser = Effect.fn("UserAdmin.createUser")(function*(request: typeof CreateUserRequest.Type) {
  const identity = yield* Identity
  const created = yield* identity.createUser(request).pipe(
    Effect.catchTags({
      NameTaken: (e) => Effect.fail(new AdminFailure({ message: `the name ${e.name} is already taken`, status: 409 })),
      InvalidInput: (e) => Effect.fail(new AdminFailure({ message: e.message, status: 400 })),
      SqlError: (e) => Effect.fail(new AdminFailure({ message: `database error: ${e.message}`, status: 503 }))
    })
  )
  return { username: created.user.username, is_admin: created.user.isAdmin, api_key: created.apiKey }
})

export const setPassword = Effect.fn("UserAdmin.setPassword")(function*(request: typeof SetPasswordRequest.Type) {
  const identity = yield* Identity
  yield* identity.setPassword(request.username, request.password).pipe(
    Effect.catchTags({
      UserNotFound: (e) => Effect.fail(new AdminFailure({ message: `no user named ${e.username}`, status: 404 })),
      InvalidInput: (e) => Effect.fail(new AdminFailure({ message: e.message, status: 400 })),
      SqlError: (e) => Effect.fail(new AdminFailure({ message: `database error: ${e.message}`, status: 503 }))
    })
  )
})
