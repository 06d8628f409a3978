/**
 * CI secrets at rest: AES-256-GCM under the server key, bound to their repository and name (as
 * associated data, so a ciphertext copied to another slot does not decrypt). The key comes from
 * the configuration; embedded mode generates `<data dir>/secret.key` (mode 0600) the first time.
 * Values are encrypted at the edge: the plaintext never reaches the bus, the inbox or a log.
 * The same key signs capability links (`sign`, with a key derived per purpose).
 */
import { Context, Effect, Layer } from "effect"
import { createCipheriv, createDecipheriv, createHmac, createSecretKey, type KeyObject, randomBytes } from "node:crypto"
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs"
import * as path from "node:path"
import { ServerConfig } from "../Config.ts"

const VERSION = "v1:"

export class SecretBox extends Context.Service<SecretBox, {
  readonly seal: (repoId: string, name: string, value: string) => string
  /** Undefined when the ciphertext does not open (another key, tampered). */
  readonly open: (repoId: string, name: string, sealed: string) => string | undefined
  /** HMAC-SHA256 (hex) of `message` under a key derived from the server key for `purpose` (e.g. chunk download links). */
  readonly sign: (purpose: string, message: string) => string
}>()("grove/server/ci/SecretBox") {
  static readonly layer = Layer.effect(SecretBox, Effect.gen(function*() {
    const config = yield* ServerConfig
    const key = yield* Effect.try({ try: () => loadKey(config), catch: (cause) => new Error(`the server key could not be read: ${String(cause)}`) }).pipe(Effect.orDie)
    return SecretBox.of(box(key))
  }))
}

export const box = (key: Uint8Array) => {
  // One derived key per purpose, as a KeyObject: a clone signs and checks thousands of links, and
  // deriving and importing a raw key each time cost more than the HMAC itself.
  const derived = new Map<string, KeyObject>()
  const keyFor = (purpose: string) => {
    let found = derived.get(purpose)
    if (found === undefined) {
      found = createSecretKey(createHmac("sha256", key).update(`grove:${purpose}`).digest())
      derived.set(purpose, found)
    }
    return found
  }
  return {
    sign: (purpose: string, message: string) => createHmac("sha256", keyFor(purpose)).update(message).digest("hex"),
    seal: (repoId: string, name: string, value: string) => {
      const iv = randomBytes(12)
      const cipher = createCipheriv("aes-256-gcm", key, iv)
      cipher.setAAD(Buffer.from(`${repoId}:${name}`))
      const body = Buffer.concat([cipher.update(value, "utf8"), cipher.final()])
      return VERSION + Buffer.concat([iv, cipher.getAuthTag(), body]).toString("base64")
    },
    open: (repoId: string, name: string, sealed: string) => {
      if (!sealed.startsWith(VERSION)) return undefined
      const raw = Buffer.from(sealed.slice(VERSION.length), "base64")
      if (raw.length < 28) return undefined
      try {
        const decipher = createDecipheriv("aes-256-gcm", key, raw.subarray(0, 12))
        decipher.setAAD(Buffer.from(`${repoId}:${name}`))
        decipher.setAuthTag(raw.subarray(12, 28))
        return Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString("utf8")
      } catch {
        return undefined
      }
    }
  }
}

const loadKey = (config: ServerConfig["Service"]): Uint8Array => {
  if (config.secretKey !== undefined) return config.secretKey
  const file = config.secretKeyFile ?? path.join(config.dataDir, "secret.key")
  if (!existsSync(file)) {
    if (config.secretKeyFile !== undefined || config.mode !== "embedded") throw new Error(`${file} does not exist`)
    mkdirSync(path.dirname(file), { recursive: true })
    writeFileSync(file, randomBytes(32).toString("base64") + "\n", { mode: 0o600, flag: "wx" })
  }
  chmodSync(file, 0o600)
  const key = Buffer.from(readFileSync(file, "utf8").trim(), "base64")
  if (key.length !== 32) throw new Error(`${file} must hold 32 bytes in base64`)
  return key
}
