/**
 * Which routes authorize before their body is read (`AccessBeforeBody`), and what they need: the
 * routes whose bodies are larger than the pre-read limit, but the chunk-link batch (its credential
 * is in the body).
 */
import { expect, it } from "@effect/vitest"
import { bodyAccess, bodyLimit, PREREAD_LIMIT, zstdBodyAccess } from "./BodyLimits.ts"

it("names the action and the path's owner and name for every large-body route", () => {
  expect(bodyAccess("POST", "/api/acme/app/push")).toEqual({ action: "write", owner: "acme", name: "app" })
  expect(bodyAccess("POST", "/api/acme/app/push/staged-v1")).toEqual({ action: "write", owner: "acme", name: "app" })
  expect(bodyAccess("PUT", `/api/acme/app/chunks/${"a".repeat(64)}`)).toEqual({ action: "write", owner: "acme", name: "app" })
  expect(bodyAccess("POST", "/api/acme/app/chunks/batch")).toEqual({ action: "write", owner: "acme", name: "app" })
  expect(bodyAccess("PUT", "/api/acme/app/blobs/proofs/tok/mappings")).toEqual({ action: "write", owner: "acme", name: "app" })
  expect(bodyAccess("POST", "/api/acme/app/blobs/info")).toEqual({ action: "read", owner: "acme", name: "app" })
  // Percent-encoding is left to the caller to decode (and refuse).
  expect(bodyAccess("POST", "/api/ac%2Fme/app/push")).toEqual({ action: "write", owner: "ac%2Fme", name: "app" })
})

it("leaves every other route alone: small bodies, other methods, the chunk-link batch", () => {
  expect(bodyAccess("GET", "/api/acme/app/push")).toBeUndefined()
  expect(bodyAccess("POST", "/api/acme/app/chunks/fetch")).toBeUndefined()
  expect(bodyAccess("POST", "/api/acme/app/blobs/check")).toBeUndefined()
  expect(bodyAccess("POST", "/api/repos")).toBeUndefined()
  expect(bodyAccess("POST", "/api/acme/app/push/extra")).toBeUndefined()
})

it("every route past the pre-read limit authorizes first, but the chunk-link batch and git's own protocol", () => {
  const large = [
    ["POST", "/api/o/n/push"],
    ["POST", "/api/o/n/push/staged-v1"],
    ["PUT", "/api/o/n/blobs/proofs/t/mappings"],
    ["POST", "/api/o/n/blobs/info"],
    ["PUT", "/api/o/n/chunks/h"],
    ["POST", "/api/o/n/chunks/batch"]
  ] as const
  for (const [method, path] of large) {
    expect(bodyLimit(method, path).limit, path).toBeGreaterThan(PREREAD_LIMIT)
    expect(bodyAccess(method, path), path).toBeDefined()
  }
})

it("a zstd body on a repository route needs read first; org routes, chunk links and plain bodies are left alone", () => {
  expect(zstdBodyAccess("POST", "/api/acme/app/blobs/check", "zstd")).toEqual({ action: "read", owner: "acme", name: "app" })
  expect(zstdBodyAccess("POST", "/api/acme/app/branches/main/merge", "zstd")).toEqual({ action: "read", owner: "acme", name: "app" })
  expect(zstdBodyAccess("POST", "/api/acme/app/blobs/check", undefined)).toBeUndefined()
  expect(zstdBodyAccess("POST", "/api/acme/app/chunks/fetch", "zstd")).toBeUndefined()
  expect(zstdBodyAccess("POST", "/api/orgs/acme/members", "zstd")).toBeUndefined()
  expect(zstdBodyAccess("POST", "/api/orgs/acme/service-accounts/bot/keys", "zstd")).toBeUndefined()
  expect(zstdBodyAccess("POST", "/api/repos", "zstd")).toBeUndefined()
})
