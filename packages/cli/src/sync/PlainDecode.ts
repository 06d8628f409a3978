/**
 * A decoder compiled from a schema's own AST, for answers that are plain JSON shapes (structs, arrays, strings,
 * numbers, booleans, null, literals, unions of them, declarations): a whole branch's pull is ~60k values, and the
 * schema library's general decoder spends ~100 ms of a clone's CPU on it before the first chunk can be asked for
 * (~400 ms at load 10). The compiled one walks the value once and builds the same output (known keys only, in the
 * schema's order). It is derived from the schema, never written beside it, so the two cannot drift; a schema with
 * anything else in it (checks, transformations, index signatures, recursion) compiles to nothing and the caller keeps
 * the schema's decoder. A value it refuses is decoded again by the schema, which then says why.
 */
import { Schema, SchemaAST } from "effect"

/** What a compiled decoder answers for a value its schema refuses. */
export const REFUSED: unique symbol = Symbol("PlainDecode.refused")

type Decode = (input: unknown) => unknown

const compile = (ast: SchemaAST.AST): Decode | undefined => {
  if (ast.checks !== undefined || ast.encoding !== undefined) return undefined
  switch (ast._tag) {
    case "String":
      return (input) => typeof input === "string" ? input : REFUSED
    case "Number":
      return (input) => typeof input === "number" && !Number.isNaN(input) ? input : REFUSED
    case "Boolean":
      return (input) => typeof input === "boolean" ? input : REFUSED
    case "Null":
      return (input) => input === null ? input : REFUSED
    case "Literal": {
      const literal = ast.literal
      return (input) => input === literal ? input : REFUSED
    }
    case "Declaration": {
      // Opaque to this compiler (a byte array...): the schema's own decoder for that one node.
      const decode = Schema.decodeUnknownExit(Schema.make<Schema.Codec<unknown>>(ast))
      return (input) => {
        const exit = decode(input)
        return exit._tag === "Success" ? exit.value : REFUSED
      }
    }
    case "Arrays": {
      if (ast.elements.length > 0 || ast.rest.length !== 1) return undefined
      const item = compile(ast.rest[0]!)
      if (item === undefined) return undefined
      return (input) => {
        if (!Array.isArray(input)) return REFUSED
        let out: Array<unknown> | undefined
        for (let i = 0; i < input.length; i++) {
          const value = item(input[i])
          if (value === REFUSED) return REFUSED
          if (value !== input[i]) (out ??= input.slice(0, i))[i] = value
          else if (out !== undefined) out[i] = value
        }
        return out ?? input
      }
    }
    case "Objects": {
      if (ast.indexSignatures.length > 0 || ast.propertySignatures.length === 0) return undefined
      const fields: Array<{ readonly name: string; readonly optional: boolean; readonly decode: Decode }> = []
      for (const property of ast.propertySignatures) {
        const decode = compile(property.type)
        if (decode === undefined || typeof property.name !== "string") return undefined
        fields.push({ name: property.name, optional: SchemaAST.isOptional(property.type), decode })
      }
      return (input) => {
        if (typeof input !== "object" || input === null || Array.isArray(input)) return REFUSED
        const record = input as Record<string, unknown>
        // The value itself when it has no other keys and every field decodes to itself (JSON's plain values do);
        // a copy with the known keys only otherwise, as the schema's own decoder answers.
        let same = true
        let present = 0
        for (const field of fields) {
          if (!Object.hasOwn(record, field.name)) {
            if (field.optional) continue
            return REFUSED
          }
          present++
          const value = record[field.name]
          const decoded = field.decode(value)
          if (decoded === REFUSED) return REFUSED
          if (decoded !== value) same = false
        }
        if (same && Object.keys(record).length === present) return record
        const out: Record<string, unknown> = {}
        for (const field of fields) if (Object.hasOwn(record, field.name)) out[field.name] = field.decode(record[field.name])
        return out
      }
    }
    case "Union": {
      if (ast.options?.mode === "oneOf") return undefined
      const members: Array<Decode> = []
      for (const type of ast.types) {
        const decode = compile(type)
        if (decode === undefined) return undefined
        members.push(decode)
      }
      return (input) => {
        for (const member of members) {
          const value = member(input)
          if (value !== REFUSED) return value
        }
        return REFUSED
      }
    }
    default:
      return undefined
  }
}

/**
 * The decoder of `schema`'s plain shape: its output for a value the schema takes (as `Schema.decodeUnknownSync`
 * would give), `REFUSED` for one it does not; undefined when the schema is not a plain shape.
 */
export const plainDecoder = <S extends Schema.Top>(schema: S): ((input: unknown) => S["Type"] | typeof REFUSED) | undefined =>
  compile(schema.ast) as ((input: unknown) => S["Type"] | typeof REFUSED) | undefined
