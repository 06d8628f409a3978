/**
 * `grove audit` against a stand-in server: it follows `X-Next-Cursor` through every page (a real
 * server answers 200 entries a page), keeps the filters on each request, and stops on the last page.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { connectWith } from "../Client.ts"
import { allPages, detailsText } from "./Audit.ts"

const entry = (id: number) => ({ id: String(id), actor: "ada", action: "repo.delete", target: `acme/r${id}`, details: {}, created_at: "2026-11-24T16:00:00.000Z" })

/** Three pages: 3, 2, 1 entries; the cursor is the next page's number. */
const pagedServer = Effect.acquireRelease(
  Effect.promise(() =>
    new Promise<{ url: string; requests: Array<string>; server: http.Server }>((resolve) => {
      const requests: Array<string> = []
      const pages = [[entry(6), entry(5), entry(4)], [entry(3), entry(2)], [entry(1)]]
      const server = http.createServer((request, response) => {
        requests.push(request.url!)
        const url = new URL(request.url!, "http://x")
        const index = Number(url.searchParams.get("cursor") ?? "0")
        const headers: Record<string, string> = { "content-type": "application/json" }
        if (index + 1 < pages.length) headers["x-next-cursor"] = String(index + 1)
        response.writeHead(200, headers)
        response.end(JSON.stringify({ entries: pages[index] }))
      })
      server.listen(0, "127.0.0.1", () => resolve({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, requests, server }))
    })
  ),
  ({ server }) => Effect.promise(() => new Promise<void>((resolve) => server.close(() => resolve())))
)

describe("grove audit", () => {
  it.live("follows X-Next-Cursor through every page with the same filters", () =>
    Effect.gen(function*() {
      const server = yield* pagedServer
      const connection = yield* connectWith({ remote: server.url, credential: Option.none(), passed: [] })
      const entries = yield* allPages(connection, "acme", { action: "repo.delete" })
      expect(entries.map((e) => e.id)).toEqual(["6", "5", "4", "3", "2", "1"])
      expect(server.requests).toEqual([
        "/api/orgs/acme/audit?action=repo.delete",
        "/api/orgs/acme/audit?action=repo.delete&cursor=1",
        "/api/orgs/acme/audit?action=repo.delete&cursor=2"
      ])
    }).pipe(Effect.scoped))

  it("shows details as key=value, strings bare and other values as JSON", () => {
    expect(detailsText({ public: true, to: "ada/moved", n: 2, list: ["a"] })).toBe('public=true to=ada/moved n=2 list=["a"]')
    expect(detailsText({})).toBe("")
  })
})
