/**
 * Routes that care who the client is (the sign-in throttles, anonymous event streams, the session
 * cookie's `Secure`): behind trusted proxies (`--trusted-proxies`) the client address and scheme are
 * the ones they name in `X-Forwarded-For` and `X-Forwarded-Proto`; from any other peer those headers
 * are ignored, so they cannot be forged. Without the option, the route is added as it is.
 */
import { Effect, Layer } from "effect"
import { HttpMiddleware, HttpRouter, type HttpServerRequest, type HttpServerResponse } from "effect/http"
import { IpNetwork } from "effect/net"
import { ServerConfig } from "../Config.ts"

/** `HttpRouter.add`, with the forwarded headers of trusted proxies applied to the request first. */
export const addBehindProxies = <E, R>(
  method: "GET" | "POST",
  path: `/${string}`,
  handler: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R | HttpServerRequest.HttpServerRequest>
) =>
  Layer.unwrap(Effect.gen(function*() {
    // Parsed once, when the route is built: the configuration does not change while the server runs.
    const config = yield* ServerConfig
    const proxies = (config.trustedProxies ?? []).map((network) => IpNetwork.fromStringUnsafe(network))
    return HttpRouter.add(method, path, proxies.length === 0 ? handler : HttpMiddleware.xForwardedHeaders({ trustedProxies: proxies })(handler))
  }))
