/**
 * The minisign key that signs published releases, read once at start from the file the operator
 * names (`--release-signing-key-file`; its password, when encrypted, from
 * `GROVE_RELEASE_SIGNING_KEY_PASSWORD`). It never reaches the database. A configured key that
 * cannot be read stops the start with the reason; no key configured leaves publishing off (503).
 */
import * as Minisign from "@grove/core/release/Minisign"
import { Context, Effect, Layer, Option } from "effect"
import { readFile } from "node:fs/promises"
import { ServerConfig } from "../Config.ts"

export class ReleaseSignerError extends Error {}

export class ReleaseSigner extends Context.Service<ReleaseSigner, {
  readonly key: Option.Option<Minisign.SecretKey>
}>()("grove/server/releases/ReleaseSigner") {
  static readonly layer = Layer.effect(ReleaseSigner, Effect.gen(function*() {
    const release = (yield* ServerConfig).release
    const file = release?.signingKeyFile
    if (file === undefined) return ReleaseSigner.of({ key: Option.none() })
    const key = yield* Effect.tryPromise({
      try: async () => Minisign.readSecretKey(await readFile(file, "utf8"), release?.signingKeyPassword),
      catch: (error) =>
        new ReleaseSignerError(`the release signing key ${file} cannot be used: ${error instanceof Error ? error.message : String(error)}`)
    })
    return ReleaseSigner.of({ key: Option.some(key) })
  }))
}
