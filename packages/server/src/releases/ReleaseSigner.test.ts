/**
 * The signing key is read once at start: none configured leaves publishing off; a key that cannot
 * be used (missing file, encrypted without its password) stops the start with the reason.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Layer, Option } from "effect"
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { parseConfig, ServerConfig } from "../Config.ts"
import { ReleaseSigner } from "./ReleaseSigner.ts"

const signer = (args: ReadonlyArray<string>, env: NodeJS.ProcessEnv = {}) =>
  Effect.gen(function*() {
    return yield* ReleaseSigner
  }).pipe(
    Effect.provide(ReleaseSigner.layer.pipe(Layer.provide(Layer.succeed(ServerConfig, parseConfig(args, env))))),
    Effect.exit,
    Effect.runPromise
  )

describe("ReleaseSigner", () => {
  it("reads a minisign -G -W key, leaves publishing off without one, and refuses one it cannot use", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "grove-signer-"))
    try {
      const sec = path.join(dir, "k.sec")
      execFileSync("minisign", ["-G", "-W", "-p", path.join(dir, "k.pub"), "-s", sec], { stdio: "ignore" })
      const loaded = await signer(["--release-signing-key-file", sec])
      expect(Exit.isSuccess(loaded) && Option.isSome(loaded.value.key)).toBe(true)
      const none = await signer([])
      expect(Exit.isSuccess(none) && Option.isNone(none.value.key)).toBe(true)
      const missing = await signer(["--release-signing-key-file", path.join(dir, "nope.sec")])
      expect(Exit.isFailure(missing)).toBe(true)
      expect(String(Exit.isFailure(missing) ? missing.cause : "")).toContain("nope.sec cannot be used")
      fs.writeFileSync(path.join(dir, "bad.sec"), "untrusted comment: x\nnot-a-key!\n")
      const bad = await signer(["--release-signing-key-file", path.join(dir, "bad.sec")])
      expect(String(Exit.isFailure(bad) ? bad.cause : "")).toContain("not a minisign secret key")
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })
})
