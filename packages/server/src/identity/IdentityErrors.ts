import { Data } from "effect"

export class NameTaken extends Data.TaggedError("NameTaken")<{ readonly name: string }> {}
export class InvalidInput extends Data.TaggedError("InvalidInput")<{ readonly message: string }> {}
export class UserNotFound extends Data.TaggedError("UserNotFound")<{ readonly username: string }> {}
/** A token that is malformed, unknown, revoked or expired. Never says which. */
export class InvalidToken extends Data.TaggedError("InvalidToken")<{}> {}
export class KeyNotFound extends Data.TaggedError("KeyNotFound")<{ readonly id: string }> {}
export class CodeNotValid extends Data.TaggedError("CodeNotValid")<{}> {}
