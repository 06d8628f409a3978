/** `{site_url}/`: what this server is and where its API lives. */
import { Effect } from "effect"
import { HttpRouter, HttpServerResponse } from "effect/http"
import { ServerConfig } from "../Config.ts"
import { SERVER_VERSION } from "../Version.ts"
import { escapeHtml, page } from "./Html.ts"

export const HomePage = HttpRouter.add("GET", "/", Effect.gen(function*() {
  const config = yield* ServerConfig
  return HttpServerResponse.text(
    page(
      "Grove",
      `<h1>Grove ${escapeHtml(SERVER_VERSION)}</h1>
<p>Repository hosting. Use the <code>grove</code> client: <code>grove login --remote ${escapeHtml(config.siteUrl)}</code>.</p>
<p>API: <a href="api/openapi.json">${escapeHtml(config.siteUrl)}/api</a> (OpenAPI document).</p>`
    ),
    { contentType: "text/html; charset=utf-8" }
  )
}))
