/**
 * The pages' static files, read once at start-up from `web/assets/` (no build step, no network),
 * served under content-hashed names (`/-/assets/style.<hash>.css`) with a year's immutable cache, so
 * a cold page costs its HTML and one stylesheet, and a warm one its HTML only. Compressed copies
 * (brotli, gzip) are made once too.
 */
import { Effect } from "effect"
import { HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"
import { createHash } from "node:crypto"
import { readFileSync } from "node:fs"
import { brotliCompressSync, gzipSync } from "node:zlib"

interface Asset {
  readonly name: string
  readonly type: string
  readonly plain: Uint8Array
  readonly gzip: Uint8Array
  readonly brotli: Uint8Array
}

const load = (file: string, type: string): Asset => {
  const plain = readFileSync(new URL(`./assets/${file}`, import.meta.url))
  const hash = createHash("sha256").update(plain).digest("hex").slice(0, 12)
  const dot = file.lastIndexOf(".")
  return {
    name: `${file.slice(0, dot)}.${hash}${file.slice(dot)}`,
    type,
    plain,
    gzip: gzipSync(plain, { level: 9 }),
    brotli: brotliCompressSync(plain)
  }
}

const stylesheet = load("style.css", "text/css; charset=utf-8")
const script = load("app.js", "text/javascript; charset=utf-8")
const byName = new Map([stylesheet, script].map((asset) => [asset.name, asset]))

export const ASSETS_PATH = "/-/assets"
export const stylesheetUrl = `${ASSETS_PATH}/${stylesheet.name}`
export const scriptUrl = `${ASSETS_PATH}/${script.name}`

/** Which encoding of a response the client accepts: brotli first, then gzip. */
export const preferredEncoding = (acceptEncoding: string | undefined): "br" | "gzip" | undefined => {
  const accepted = (acceptEncoding ?? "").toLowerCase().split(",").map((part) => part.trim().split(";")[0])
  return accepted.includes("br") ? "br" : accepted.includes("gzip") ? "gzip" : undefined
}

export const AssetRoutes = HttpRouter.add("GET", `${ASSETS_PATH}/:file`, Effect.gen(function*() {
  const request = yield* HttpServerRequest.HttpServerRequest
  const params = yield* HttpRouter.params
  const asset = byName.get(params.file ?? "")
  if (asset === undefined) {
    return HttpServerResponse.text("not found", { status: 404, headers: { "cache-control": "no-store" } })
  }
  const encoding = preferredEncoding(request.headers["accept-encoding"])
  const body = encoding === "br" ? asset.brotli : encoding === "gzip" ? asset.gzip : asset.plain
  return HttpServerResponse.uint8Array(body, {
    contentType: asset.type,
    headers: {
      "cache-control": "public, max-age=31536000, immutable",
      vary: "accept-encoding",
      ...(encoding === undefined ? {} : { "content-encoding": encoding })
    }
  })
}))
