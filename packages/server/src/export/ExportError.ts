/** Failures of the exporters themselves (I/O, zlib, a source whose blob differs from its stated size); source errors pass through as they are. */
import { Schema } from "effect"

export class ExportError extends Schema.TaggedError<ExportError>()("ExportError", {
  message: Schema.String,
  cause: Schema.optional(Schema.Defect())
}) {}

export const exportError = (message: string) => (cause: unknown): ExportError => new ExportError({ message, cause })
