import { Data } from "effect"

export class NameTaken extends Data.TaggedError("NameTaken")<{ readonly name: string }> {}
export class InvalidInput extends Data.TaggedError("InvalidInput")<{ readonly message: string }> {}
export class UserNotFound extends Data.TaggedError("UserNotFound")<{ readonly username: string }> {}
/** A token that is malformed, unknown or revoked. Never says which. */
export class InvalidToken extends Data.TaggedError("InvalidToken")<{}> {}
/** A token that matched but whose expiry has passed: only its holder can learn that (401 token_expired). */
export class TokenExpired extends Data.TaggedError("TokenExpired")<{}> {}
export class CodeNotValid extends Data.TaggedError("CodeNotValid")<{}> {}
