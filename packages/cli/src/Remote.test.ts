import { describe, expect, it } from "@effect/vitest"
import { chooseRemote, DEFAULT_REMOTE, normaliseRemote, sameRemote } from "./Remote.ts"

describe("Remote", () => {
  it("normalises server addresses to scheme://host[:port][/path]", () => {
    expect(normaliseRemote("http://127.0.0.1:8080/")).toBe("http://127.0.0.1:8080")
    expect(normaliseRemote("HTTP://Grove.Example.COM:443/")).toBe("http://grove.example.com:443")
    expect(normaliseRemote("https://grove.example.com:443/")).toBe("https://grove.example.com")
    expect(normaliseRemote("https://example.com/grove//?x=1#y")).toBe("https://example.com/grove")
    expect(normaliseRemote("  http://h:1  ")).toBe("http://h:1")
    for (const bad of ["", "127.0.0.1:8080", "ftp://h", "http://user:pw@h", "not a url"]) {
      expect(normaliseRemote(bad), bad).toBeUndefined()
    }
  })

  it("compares servers by their normalised address", () => {
    expect(sameRemote("http://127.0.0.1:8080", "http://127.0.0.1:8080/")).toBe(true)
    expect(sameRemote("http://127.0.0.1:8080", "http://localhost:8080")).toBe(false)
    expect(sameRemote("http://127.0.0.1:8080", "http://127.0.0.1:8081")).toBe(false)
    expect(sameRemote("garbage", "garbage")).toBe(false)
  })

  it("chooses --remote, then GROVE_REMOTE, then the default", () => {
    expect(chooseRemote("http://a:1/", { GROVE_REMOTE: "http://b:2" })).toEqual({ remote: "http://a:1" })
    expect(chooseRemote(undefined, { GROVE_REMOTE: "http://b:2/" })).toEqual({ remote: "http://b:2" })
    expect(chooseRemote(undefined, { GROVE_REMOTE: "" })).toEqual({ remote: DEFAULT_REMOTE })
    expect(chooseRemote(undefined, {})).toEqual({ remote: DEFAULT_REMOTE })
    // The fallback (the checkout's server or the last login) comes after both.
    expect(chooseRemote(undefined, {}, "http://last:3")).toEqual({ remote: "http://last:3" })
    expect(chooseRemote(undefined, { GROVE_REMOTE: "http://b:2" }, "http://last:3")).toEqual({ remote: "http://b:2" })
    expect(chooseRemote("http://a:1", {}, "http://last:3")).toEqual({ remote: "http://a:1" })
    expect(chooseRemote("ftp://x", {})).toEqual({ error: "--remote: not an http(s) server address: ftp://x" })
    expect(chooseRemote(undefined, { GROVE_REMOTE: "nope" })).toEqual({ error: "GROVE_REMOTE: not an http(s) server address: nope" })
  })
})
