/**
 * What a build of `grove` knows about itself: its version, its platform, and the minisign public
 * key `grove upgrade` trusts. The single-file build (scripts/build-sea.ts) writes the version and
 * the key in at build time (esbuild `define`); run from its sources there is no key, so `grove
 * upgrade` refuses. The key is never read at run time from the environment: whoever sets that
 * could make grove trust anything.
 */
import { platformOf } from "@grove/core/release/Versions"

declare const __GROVE_BUILD_VERSION__: string | undefined
declare const __GROVE_RELEASE_PUBLIC_KEY__: string | undefined

export const VERSION: string = typeof __GROVE_BUILD_VERSION__ === "string" ? __GROVE_BUILD_VERSION__ : "0.1.0"

export const RELEASE_PUBLIC_KEY: string | undefined = typeof __GROVE_RELEASE_PUBLIC_KEY__ === "string"
  ? __GROVE_RELEASE_PUBLIC_KEY__
  : undefined

export const PLATFORM = platformOf(process.platform, process.arch)

/** What `grove --version` prints: effect/cli's "name vVERSION" for the version Cli.ts gives it (main.ts prints it without effect/cli). */
export const VERSION_LINE = `grove v${VERSION} (${PLATFORM})`
