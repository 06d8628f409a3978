/**
 * `grove upgrade`: replaces this single-file grove with the newest release for its platform.
 *
 * 1. `GET /api/releases`: the newest version published for this platform; nothing newer: done.
 * 2. The binary is written to `grove.new` beside this one; its SHA-256 must equal the server's, and
 *    its minisign signature must verify with the public key built into this binary (BuildInfo) with a
 *    trusted comment naming that version and platform. Any mismatch: `grove.new` goes, exit 1, this
 *    binary untouched.
 * 3. The swap (the Oak client's order): this binary becomes `grove.old`, `grove.new` becomes `grove`,
 *    the new one must run `--version` and name the new version; then `grove.old` goes. On any failure
 *    `grove.old` is put back.
 */
import * as Minisign from "@grove/core/release/Minisign"
import { compareVersions } from "@grove/core/release/Versions"
import { Effect, Option } from "effect"
import { spawnSync } from "node:child_process"
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import { PLATFORM, RELEASE_PUBLIC_KEY, VERSION } from "../BuildInfo.ts"
import { failure } from "../Failures.ts"
import { Output } from "../Output.ts"
import { request } from "./Release.ts"

interface ReleaseJson {
  readonly version: string
  readonly platform: string
  readonly sha256: string
  readonly url: string
  readonly minisig_url: string
}

const isSingleFile = (): boolean => {
  try {
    return (process.getBuiltinModule("node:sea") as { isSea?: () => boolean } | undefined)?.isSea?.() === true
  } catch {
    return false
  }
}

const refuse = (message: string, code: string, newFile: string) =>
  Effect.andThen(Effect.sync(() => fs.rmSync(newFile, { force: true })), Effect.fail(failure(message, code)))

export const upgrade = Effect.fn("Upgrade.upgrade")(function*(remote: string) {
  const out = yield* Output
  if (RELEASE_PUBLIC_KEY === undefined || !isSingleFile()) {
    return yield* failure("grove upgrade replaces the single-file grove (npm run build:cli, or a release); this one runs from its sources", "not_upgradable")
  }
  const publicKey = Minisign.readPublicKey(RELEASE_PUBLIC_KEY)
  // Releases are public: no credential is sent.
  const context = { remote, credential: Option.none() }
  const listed = yield* request(context, `${remote}/api/releases`)
  const { releases } = (yield* Effect.promise(() => listed.json())) as { releases: ReadonlyArray<ReleaseJson> }
  const newest = releases.filter((r) => r.platform === PLATFORM).sort((a, b) => compareVersions(b.version, a.version))[0]
  if (newest === undefined || compareVersions(newest.version, VERSION) <= 0) {
    return yield* out.result({ upgraded: false, version: VERSION }, () => `grove ${VERSION} is the newest release for ${PLATFORM}.`)
  }
  const exe = fs.realpathSync(process.execPath)
  const newFile = `${exe}.new`
  const oldFile = `${exe}.old`
  const download = yield* request(context, newest.url)
  const bytes = new Uint8Array(yield* Effect.promise(() => download.arrayBuffer()))
  const signed = yield* request(context, newest.minisig_url)
  const signature = yield* Effect.promise(() => signed.text())
  yield* Effect.sync(() => fs.writeFileSync(newFile, bytes, { mode: 0o755 }))
  const sha256 = createHash("sha256").update(bytes).digest("hex")
  if (sha256 !== newest.sha256) {
    return yield* refuse(`the downloaded ${newest.version} does not match its SHA-256 (${sha256}, expected ${newest.sha256}): not installed`, "checksum_mismatch", newFile)
  }
  let comment: string
  try {
    comment = Minisign.verifySignature(publicKey, signature, bytes)
  } catch (error) {
    return yield* refuse(`the signature of ${newest.version} does not verify (${error instanceof Error ? error.message : String(error)}): not installed`, "bad_signature", newFile)
  }
  // The trusted comment is signed: it must name this version and platform (no older binary replayed as newer).
  if (!comment.startsWith(`grove ${newest.version} ${PLATFORM} `)) {
    return yield* refuse(`the signature of ${newest.version} is for '${comment}': not installed`, "bad_signature", newFile)
  }
  const swapped = yield* Effect.sync(() => {
    fs.renameSync(exe, oldFile)
    try {
      fs.renameSync(newFile, exe)
      const ran = spawnSync(exe, ["--version"], { encoding: "utf8", timeout: 60_000 })
      if (ran.status !== 0 || !ran.stdout.includes(newest.version)) throw new Error(`the new grove did not run: ${ran.stderr || ran.stdout}`)
      fs.rmSync(oldFile, { force: true })
      return undefined
    } catch (error) {
      fs.renameSync(oldFile, exe)
      fs.rmSync(newFile, { force: true })
      return error instanceof Error ? error.message : String(error)
    }
  })
  if (swapped !== undefined) return yield* failure(`${swapped}; kept ${VERSION}`, "upgrade_failed")
  yield* out.result({ upgraded: true, from: VERSION, version: newest.version }, () => `Upgraded grove ${VERSION} -> ${newest.version}.`)
})
