import { describe, expect, it } from "@effect/vitest"
import { byteListJson } from "./ObjectHandlers.ts"

describe("byteListJson", () => {
  it("writes the inside of a JSON number array, as serde writes a Vec<u8>", () => {
    const every = Uint8Array.from({ length: 256 }, (_, i) => i)
    for (const bytes of [new Uint8Array(0), Uint8Array.of(0), Uint8Array.of(255), every, every.reverse()]) {
      const text = Buffer.from(byteListJson(bytes)).toString("latin1")
      expect(text).toBe(JSON.stringify(Array.from(bytes)).slice(1, -1))
      expect(JSON.parse(`[${text}]`)).toEqual(Array.from(bytes))
    }
  })
})
