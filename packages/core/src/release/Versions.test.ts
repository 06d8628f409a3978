import { describe, expect, it } from "@effect/vitest"
import { compareVersions, isPlatform, isVersion, platformOf } from "./Versions.ts"

describe("release Versions", () => {
  it("accepts semver versions and os-arch platforms, and nothing a path could climb with", () => {
    for (const ok of ["0.1.0", "1.2.3", "10.20.30-rc.1", "1.0.0-alpha"]) expect(isVersion(ok)).toBe(true)
    for (const bad of ["", "1.2", "01.2.3", "1.2.3/..", "..", "1.2.3-", "1.2.3-a..b", "1.2.3\u0000", "v1.2.3", "1.2.3%2f"]) {
      expect(isVersion(bad)).toBe(false)
    }
    for (const ok of ["linux-x86_64", "darwin-arm64", "linux-aarch64"]) expect(isPlatform(ok)).toBe(true)
    for (const bad of ["linux", "..", "linux-x86_64/..", "Linux-x86_64", "linux-", "-x86_64", "linux-x86.64"]) expect(isPlatform(bad)).toBe(false)
  })

  it("orders versions by semver precedence", () => {
    const sorted = ["1.0.0", "0.9.9", "1.0.0-rc.1", "1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-rc.10", "1.0.0-rc.2", "10.0.0", "2.0.0"]
      .sort(compareVersions)
    expect(sorted).toEqual(["0.9.9", "1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-rc.1", "1.0.0-rc.2", "1.0.0-rc.10", "1.0.0", "2.0.0", "10.0.0"])
    expect(platformOf("linux", "x64")).toBe("linux-x86_64")
  })
})
