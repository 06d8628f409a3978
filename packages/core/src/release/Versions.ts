/**
 * Release names, shared by the server (which checks them in paths) and the client (which picks the
 * newest): a version is `MAJOR.MINOR.PATCH` with an optional `-prerelease` (semver), a platform is
 * `os-arch` in lowercase (`linux-x86_64`). Neither can hold `/`, `..` or anything a path would read.
 */

export const VERSION_PATTERN = /^(0|[1-9][0-9]{0,8})\.(0|[1-9][0-9]{0,8})\.(0|[1-9][0-9]{0,8})(?:-([0-9A-Za-z]+(?:\.[0-9A-Za-z]+)*))?$/
export const PLATFORM_PATTERN = /^[a-z0-9]+-[a-z0-9_]+$/
const MAX_VERSION = 64
const MAX_PLATFORM = 32

export const isVersion = (text: string): boolean => text.length <= MAX_VERSION && VERSION_PATTERN.test(text)
export const isPlatform = (text: string): boolean => text.length <= MAX_PLATFORM && PLATFORM_PATTERN.test(text)

/** Semver precedence: numbers numerically, a prerelease below its release, prerelease parts in order. */
export const compareVersions = (a: string, b: string): number => {
  const left = VERSION_PATTERN.exec(a)
  const right = VERSION_PATTERN.exec(b)
  if (left === null || right === null) return a < b ? -1 : a > b ? 1 : 0
  for (let i = 1; i <= 3; i++) {
    const difference = Number(left[i]) - Number(right[i])
    if (difference !== 0) return Math.sign(difference)
  }
  const [pa, pb] = [left[4], right[4]]
  if (pa === undefined || pb === undefined) return pa === pb ? 0 : pa === undefined ? 1 : -1
  const partsA = pa.split(".")
  const partsB = pb.split(".")
  for (let i = 0; i < Math.max(partsA.length, partsB.length); i++) {
    const [x, y] = [partsA[i], partsB[i]]
    if (x === undefined) return -1
    if (y === undefined) return 1
    const [nx, ny] = [/^[0-9]+$/.test(x), /^[0-9]+$/.test(y)]
    if (nx && ny && Number(x) !== Number(y)) return Math.sign(Number(x) - Number(y))
    if (nx !== ny) return nx ? -1 : 1
    if (x !== y) return x < y ? -1 : 1
  }
  return 0
}

/** This process's platform in release names (`linux-x86_64`, `darwin-arm64`). */
export const platformOf = (os: string, arch: string): string =>
  `${os}-${arch === "x64" ? "x86_64" : arch === "arm64" && os === "linux" ? "aarch64" : arch}`
