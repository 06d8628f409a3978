/**
 * Client releases, under `{base_url}` as the spec lists them:
 * - public: `GET /api/releases` (`{releases: [...]}`, newest first), `/api/releases/latest`
 *   (`{version, releases: [...]}`: the newest version's platforms), `/api/releases/{version}/{platform}`
 *   (the binary), `…/sha256` (64 lowercase hex and a newline, as `sha256sum` compares) and `…/minisig`;
 * - `PUT /api/releases/{version}/{platform}`: publish (201 with the record; 409 when it exists),
 *   only with a `release` key of a service account of the organization `--release-org` names.
 * Versions and platforms are checked against their patterns (core/release/Versions) before anything
 * else: a segment that is not one (`..`, `/`, control characters) answers 400.
 */
import { ApiErrors } from "@grove/api"
import * as Minisign from "@grove/core/release/Minisign"
import { isPlatform, isVersion } from "@grove/core/release/Versions"
import { Effect, Layer, Option } from "effect"
import { HttpRouter, HttpServerResponse } from "effect/http"
import { Authorizer } from "../access/Authorizer.ts"
import { ServerConfig } from "../Config.ts"
import { principalKey } from "../http/CallerContext.ts"
import { dbUnavailable } from "../http/Failures.ts"
import { answer, requestCaller } from "../http/RawRoutes.ts"
import { ReleaseSigner } from "./ReleaseSigner.ts"
import { type ReleaseRecord, Releases } from "./Releases.ts"
import { receiveBinary } from "./ReleaseUpload.ts"

const releaseParams = Effect.gen(function*() {
  const params = yield* HttpRouter.params
  const version = params.version ?? ""
  const platform = params.platform ?? ""
  if (!isVersion(version)) {
    return yield* new ApiErrors.BadRequest({ error: "invalid path parameter 'version': a version is MAJOR.MINOR.PATCH[-prerelease]", code: "invalid_input" })
  }
  if (!isPlatform(platform)) {
    return yield* new ApiErrors.BadRequest({ error: "invalid path parameter 'platform': a platform is os-arch, such as linux-x86_64", code: "invalid_input" })
  }
  return { version, platform }
})

const recordJson = (siteUrl: string, record: ReleaseRecord) => {
  const url = `${siteUrl}/api/releases/${record.version}/${record.platform}`
  return {
    version: record.version,
    platform: record.platform,
    sha256: record.sha256,
    size: record.size,
    published_at: record.publishedAt.toISOString(),
    url,
    sha256_url: `${url}/sha256`,
    minisig_url: `${url}/minisig`
  }
}

const siteUrl = Effect.gen(function*() {
  return (yield* ServerConfig).siteUrl
})

/** The release a path names, or 404. */
const namedRelease = Effect.gen(function*() {
  const { version, platform } = yield* releaseParams
  const found = yield* dbUnavailable((yield* Releases).find(version, platform))
  if (Option.isNone(found)) {
    return yield* new ApiErrors.NotFound({ error: `no release ${version} for ${platform}`, code: "not_found" })
  }
  return found.value
})

const list = HttpRouter.add("GET", "/api/releases", answer(Effect.gen(function*() {
  const records = yield* dbUnavailable((yield* Releases).list)
  const site = yield* siteUrl
  return HttpServerResponse.jsonUnsafe({ releases: records.map((record) => recordJson(site, record)) })
})))

const latest = HttpRouter.add("GET", "/api/releases/latest", answer(Effect.gen(function*() {
  const records = yield* dbUnavailable((yield* Releases).list)
  const newest = records[0]
  if (newest === undefined) return yield* new ApiErrors.NotFound({ error: "no release has been published", code: "not_found" })
  const site = yield* siteUrl
  return HttpServerResponse.jsonUnsafe({
    version: newest.version,
    releases: records.filter((record) => record.version === newest.version).map((record) => recordJson(site, record))
  })
})))

const binary = HttpRouter.add("GET", "/api/releases/:version/:platform", answer(Effect.gen(function*() {
  const record = yield* namedRelease
  const releases = yield* Releases
  // Stored before its row was written: a failure mid-stream can only be the store's, and cuts the response.
  return HttpServerResponse.stream(releases.bytes(record.sha256), {
    contentType: "application/octet-stream",
    contentLength: record.size,
    headers: {
      "content-disposition": `attachment; filename="grove-${record.version}-${record.platform}"`,
      etag: `"${record.sha256}"`,
      "x-content-type-options": "nosniff"
    }
  })
})))

const sha256 = HttpRouter.add("GET", "/api/releases/:version/:platform/sha256", answer(Effect.gen(function*() {
  const record = yield* namedRelease
  return HttpServerResponse.text(`${record.sha256}\n`, { headers: { "x-content-type-options": "nosniff" } })
})))

const minisig = HttpRouter.add("GET", "/api/releases/:version/:platform/minisig", answer(Effect.gen(function*() {
  const record = yield* namedRelease
  return HttpServerResponse.text(record.minisig, { headers: { "x-content-type-options": "nosniff" } })
})))

const publish = HttpRouter.add("PUT", "/api/releases/:version/:platform", answer(Effect.gen(function*() {
  const { version, platform } = yield* releaseParams
  const config = yield* ServerConfig
  const caller = yield* requestCaller
  const { principal } = caller
  if (principal.kind === "anonymous") {
    return yield* new ApiErrors.Unauthorized({ error: "sign in required: send Authorization: Bearer <token>", code: "unauthenticated" })
  }
  const org = config.release?.org
  if (org === undefined) {
    return yield* new ApiErrors.Forbidden({ error: "publishing releases is off on this server (no --release-org)", code: "releases_disabled" })
  }
  if (principal.kind !== "service_account" || principal.orgSlug !== org) {
    return yield* new ApiErrors.Forbidden({
      error: `publishing a release needs a key with the 'release' scope of a service account of organization ${org}`,
      code: "missing_scope",
      scope: "release"
    })
  }
  // The 'release' scope, never implied by 'admin' (core Access): an admin key answers 403 naming it.
  const organization = yield* dbUnavailable((yield* Authorizer).organization(caller, org, "release"))
  const signer = yield* ReleaseSigner
  if (Option.isNone(signer.key)) {
    return yield* new ApiErrors.ServiceUnavailable({
      error: "no release signing key is configured (--release-signing-key-file)",
      code: "signing_key_missing"
    })
  }
  const releases = yield* Releases
  const exists = new ApiErrors.Conflict({ error: `release ${version} for ${platform} exists already; publish a new version`, code: "release_exists" })
  if (Option.isSome(yield* dbUnavailable(releases.find(version, platform)))) return yield* exists
  const received = yield* receiveBinary(config.release?.maxBytes ?? 0)
  const minisig = Minisign.signPrehashed(signer.key.value, received.prehash, `grove ${version} ${platform} sha256:${received.sha256}`)
  const publishedBy = principalKey(caller)
  // The row is the compare-and-set: a concurrent publish of the same version and platform loses here.
  const inserted = yield* dbUnavailable(releases.insert({ version, platform, ...received, minisig, publishedBy, orgId: organization.id }))
  if (!inserted) return yield* exists
  const record = Option.getOrThrow(yield* dbUnavailable(releases.find(version, platform)))
  return HttpServerResponse.jsonUnsafe(recordJson(config.siteUrl, record), { status: 201 })
})))

export const ReleaseRoutes = Layer.mergeAll(list, latest, binary, sha256, minisig, publish)
