import { Schema } from "effect"

/** The broker could not be started: jars not resolvable, storage not formattable, or not ready in time. */
export class KafkaStartError extends Schema.TaggedError<KafkaStartError>()("KafkaStartError", {
  message: Schema.String,
  /** The last lines Maven, the storage tool or the broker printed, when there are any. */
  output: Schema.String
}) {}
