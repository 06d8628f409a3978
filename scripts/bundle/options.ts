/**
 * esbuild's options shared by the two bundles (packages/server/scripts/bundle.ts, packages/cli/scripts/bundle.ts):
 * Node 24 ES modules, chunks loaded on first use, and a `require` for the CommonJS dependencies.
 */
import type { BuildOptions } from "esbuild"

export const nodeBundleOptions = (options: BuildOptions & Required<Pick<BuildOptions, "entryPoints" | "outdir">>): BuildOptions => ({
  outExtension: { ".js": ".mjs" },
  bundle: true,
  platform: "node",
  format: "esm",
  target: "node24",
  // What is imported on demand (commands, the cluster's clients) stays in chunks of its own, loaded on first use.
  splitting: true,
  chunkNames: "chunks/[name]-[hash]",
  // CommonJS dependencies inside an ES module bundle need a require.
  banner: { js: "import { createRequire as __groveCreateRequire } from \"node:module\"; const require = __groveCreateRequire(import.meta.url);" },
  logLevel: "warning",
  ...options
})
