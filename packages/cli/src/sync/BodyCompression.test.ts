import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { HttpClientRequest } from "effect/http"
import { compressRequest } from "../Client.ts"

const accepted = (site: string) =>
  Effect.map(compressRequest(site, undefined)(HttpClientRequest.get(`${site}/api/o/n/pull`)), (request) => request.headers["accept-encoding"])

describe("BodyCompression", () => {
  it.effect("answers are asked compressed from another machine, plain from this one unless GROVE_CHUNK_COMPRESSION=on", () =>
    Effect.gen(function*() {
      const before = process.env["GROVE_CHUNK_COMPRESSION"]
      try {
        delete process.env["GROVE_CHUNK_COMPRESSION"]
        expect(yield* accepted("https://grove.example.com")).toMatch(/zstd/)
        for (const site of ["http://127.0.0.1:8080", "http://localhost:8080", "http://[::1]:8080"]) expect(yield* accepted(site)).toBeUndefined()
        process.env["GROVE_CHUNK_COMPRESSION"] = "on"
        expect(yield* accepted("http://127.0.0.1:8080")).toMatch(/zstd/)
        process.env["GROVE_CHUNK_COMPRESSION"] = "off"
        expect(yield* accepted("https://grove.example.com")).toBeUndefined()
      } finally {
        if (before === undefined) delete process.env["GROVE_CHUNK_COMPRESSION"]
        else process.env["GROVE_CHUNK_COMPRESSION"] = before
      }
    }))
})
