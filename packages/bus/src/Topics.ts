/**
 * The topics Grove uses, with their fixed partition counts and retention, as
 * declared in `infra/topics.json`. Both buses create missing topics from these
 * declarations at start and refuse to run against a topic whose partition
 * count differs (that would move keys between partitions).
 */
import { Schema } from "effect"
import declared from "../../../infra/topics.json" with { type: "json" }

export class TopicSpec extends Schema.Class<TopicSpec>("grove/bus/TopicSpec")({
  name: Schema.NonEmptyString,
  partitions: Schema.Int.check(Schema.isGreaterThan(0)),
  retentionMs: Schema.Int,
  description: Schema.optionalKey(Schema.String)
}) {}

const TopicsFile = Schema.Struct({ topics: Schema.Array(TopicSpec) })

/** Every topic declared in `infra/topics.json`. */
export const all: ReadonlyArray<TopicSpec> = Schema.decodeUnknownSync(TopicsFile)(declared).topics

export const commands = "grove.commands"
export const replies = "grove.replies"
export const events = "grove.events"
export const deadLetters = "grove.dead-letters"

/** The declaration of a topic by name, if declared. */
export const find = (topics: ReadonlyArray<TopicSpec>, name: string): TopicSpec | undefined =>
  topics.find((topic) => topic.name === name)
