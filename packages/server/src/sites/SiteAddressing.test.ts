import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit } from "effect"
import { rangeOf, siteContentType } from "./SiteFiles.ts"
import { parseSettings } from "./SiteRoutes.ts"
import { siteUrl } from "./Sites.ts"
import { siteOfHost } from "./SiteServing.ts"

describe("siteOfHost", () => {
  it("names the organization of one label under the sites domain, whatever the case and port", () => {
    expect(siteOfHost("acme.sites.test", "sites.test")).toBe("acme")
    expect(siteOfHost("ACME.Sites.Test:8080", "sites.test")).toBe("acme")
    expect(siteOfHost("a.b.sites.test", "sites.test")).toBeUndefined()
    expect(siteOfHost("sites.test", "sites.test")).toBeUndefined()
    expect(siteOfHost("acme.evilsites.test", "sites.test")).toBeUndefined()
    expect(siteOfHost("acme.sites.test", undefined)).toBeUndefined()
  })
})

describe("rangeOf", () => {
  it("reads one byte range, clamps its end, and refuses one past the file", () => {
    expect(rangeOf("bytes=0-3", 10)).toEqual({ start: 0, end: 3 })
    expect(rangeOf("bytes=5-", 10)).toEqual({ start: 5, end: 9 })
    expect(rangeOf("bytes=-4", 10)).toEqual({ start: 6, end: 9 })
    expect(rangeOf("bytes=2-100", 10)).toEqual({ start: 2, end: 9 })
    expect(rangeOf("bytes=10-", 10)).toBe("bad")
    expect(rangeOf("bytes=0-1,3-4", 10)).toBeUndefined()
    expect(rangeOf(undefined, 10)).toBeUndefined()
  })
})

describe("siteContentType", () => {
  it("types a site's files by extension, unknown ones as bytes", () => {
    expect(siteContentType("a/index.html")).toBe("text/html; charset=utf-8")
    expect(siteContentType("logo.SVG")).toBe("image/svg+xml")
    expect(siteContentType(".htaccess")).toBe("application/octet-stream")
    expect(siteContentType("dir.v2/README")).toBe("application/octet-stream")
  })
})

describe("parseSettings", () => {
  const parse = (body: string) => Effect.runSyncExit(parseSettings("acme", body))
  it("takes a repository of the organization and a source_dir inside it", () => {
    expect(Effect.runSync(parseSettings("acme", JSON.stringify({ repo: "acme/www", source_dir: "/docs/site/" })))).toEqual({ repoName: "www", sourceDir: "docs/site" })
    expect(Effect.runSync(parseSettings("acme", JSON.stringify({ repo: "www" })))).toEqual({ repoName: "www", sourceDir: "" })
  })
  it("refuses a missing repo, another organization's, and a source_dir that climbs out", () => {
    for (const body of [{}, { repo: "" }, { repo: "zorg/www" }, { repo: "acme/www/x" }, { repo: "www", source_dir: ".." }, { repo: "www", source_dir: "a/../../b" }, { repo: "www", source_dir: 3 }]) {
      expect(Exit.isFailure(parse(JSON.stringify(body))), JSON.stringify(body)).toBe(true)
    }
  })
  it("addresses the site by host under a sites domain, else by path", () => {
    expect(siteUrl({ siteUrl: "https://grove.example" }, "acme")).toBe("https://grove.example/sites/acme/")
    expect(siteUrl({ siteUrl: "https://grove.example", sitesDomain: "sites.example" }, "acme")).toBe("https://acme.sites.example/")
  })
})
