/**
 * The web sign-in (`/-/signin`) behind `--trusted-proxies`, on the real server: the failure throttle
 * counts the client a trusted proxy names in `X-Forwarded-For`, and the cookies are `Secure` when that
 * proxy says the browser came over https (`X-Forwarded-Proto`). From a peer that is not a trusted
 * proxy, both headers are ignored. One server trusts 127.0.0.2 only; requests leave from 127.0.0.2
 * (the proxy) or 127.0.0.3 (anyone else), both of which reach a server listening on 127.0.0.1.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as http from "node:http"
import { type GroveServer, startServer } from "../support/GroveServer.ts"

const PROXY = "127.0.0.2"
const STRANGER = "127.0.0.3"

let server: GroveServer

interface Answer {
  readonly status: number
  readonly cookies: ReadonlyArray<string>
  readonly text: string
}

const send = (method: "GET" | "POST", path: string, from: string, headers: Record<string, string>, body?: string) =>
  new Promise<Answer>((resolve, reject) => {
    const url = new URL(`${server.url}${path}`)
    const request = http.request({ host: url.hostname, port: url.port, path: url.pathname, method, headers, localAddress: from }, (response) => {
      let text = ""
      response.on("data", (d: Buffer) => (text += d.toString()))
      response.on("end", () => {
        const cookies = response.headers["set-cookie"] ?? []
        resolve({ status: response.statusCode!, cookies, text })
      })
    })
    request.on("error", reject)
    request.end(body)
  })

const forwarded = (client: string | undefined, proto: string | undefined): Record<string, string> => ({
  ...(client === undefined ? {} : { "x-forwarded-for": client }),
  ...(proto === undefined ? {} : { "x-forwarded-proto": proto })
})

/** The sign-in form as a browser gets it: its CSRF cookie and the masked token of its hidden field. */
const openForm = async (from: string, client?: string, proto?: string) => {
  const page = await send("GET", "/-/signin", from, forwarded(client, proto))
  expect(page.status).toBe(200)
  const cookie = page.cookies.find((c) => c.startsWith("grove_csrf="))!
  const csrf = /name="csrf" value="([^"]+)"/.exec(page.text)![1]!
  return { cookie, csrf }
}

/** Posts the sign-in form from `from`, through the same proxy headers as the form was fetched with. */
const signIn = async (username: string, password: string, from: string, client?: string, proto?: string) => {
  const { cookie, csrf } = await openForm(from, client, proto)
  const body = new URLSearchParams({ csrf, username, password, next: "/" }).toString()
  return send("POST", "/-/signin", from, {
    "content-type": "application/x-www-form-urlencoded",
    cookie: cookie.split(";")[0]!,
    origin: server.url,
    ...forwarded(client, proto)
  }, body)
}

const isSecure = (cookie: string | undefined) => cookie !== undefined && /;\s*Secure(;|$)/i.test(cookie)
const sessionOf = (answer: Answer) => answer.cookies.find((c) => c.startsWith("grove_session="))

/** Wrong passwords until the throttle answers 429 (the delays double, so one comes however slow the machine). */
const guessUntilRefused = async (username: string, from: string, client: () => string | undefined) => {
  const statuses: Array<number> = []
  for (let i = 0; i < 12 && !statuses.includes(429); i++) statuses.push((await signIn(username, `guess-${i}`, from, client())).status)
  return statuses
}

beforeAll(async () => {
  server = await startServer({ args: ["--trusted-proxies", `${PROXY}/32`] })
  for (const user of ["hank", "ivy", "jo"]) await server.createUser(user, { password: `${user}-password-1` })
}, 300_000)

afterAll(async () => {
  await server?.stop()
})

describe("/-/signin behind --trusted-proxies", () => {
  it("throttles the clients a trusted proxy names apart: one client's guesses do not lock out another", async () => {
    const statuses = await guessUntilRefused("hank", PROXY, () => "203.0.113.66")
    expect(statuses.slice(0, 3)).toEqual([401, 401, 401])
    expect(statuses).toContain(429)
    // The guessing client stays refused, even with the right password.
    expect((await signIn("hank", "hank-password-1", PROXY, "203.0.113.66")).status).toBe(429)
    // Another client through the same proxy: a wrong password is only wrong, the right one signs in.
    expect((await signIn("hank", "nope", PROXY, "198.51.100.7")).status).toBe(401)
    const owner = await signIn("hank", "hank-password-1", PROXY, "198.51.100.7")
    expect(owner.status).toBe(303)
    expect(sessionOf(owner)).toBeDefined()
  }, 120_000)

  it("ignores X-Forwarded-For from a peer that is not a trusted proxy: a fresh header per guess does not help", async () => {
    let n = 0
    const statuses = await guessUntilRefused("ivy", STRANGER, () => `203.0.113.${++n}`)
    expect(statuses).toContain(429)
    // The stranger's own address is what was counted: from there, even a new forwarded client is refused.
    expect((await signIn("ivy", "ivy-password-1", STRANGER, "198.51.100.9")).status).toBe(429)
    // The proxy's clients are other addresses, not locked out by the stranger.
    expect((await signIn("ivy", "ivy-password-1", PROXY, "198.51.100.9")).status).toBe(303)
  }, 120_000)

  it("sets Secure cookies when a trusted proxy forwards https, and only then", async () => {
    // The site URL is http here: without a trusted proxy's word, no cookie is Secure.
    const plain = await signIn("jo", "jo-password-1", PROXY, "198.51.100.20")
    expect(plain.status).toBe(303)
    expect(sessionOf(plain)).toMatch(/HttpOnly/)
    expect(isSecure(sessionOf(plain))).toBe(false)

    const viaHttps = await signIn("jo", "jo-password-1", PROXY, "198.51.100.20", "https")
    expect(viaHttps.status).toBe(303)
    expect(sessionOf(viaHttps)).toMatch(/HttpOnly; SameSite=Lax/)
    expect(isSecure(sessionOf(viaHttps))).toBe(true)
    expect(isSecure((await send("GET", "/-/signin", PROXY, forwarded("198.51.100.20", "https"))).cookies[0])).toBe(true)

    // The same claim from anyone else is ignored.
    const forged = await signIn("jo", "jo-password-1", STRANGER, "198.51.100.20", "https")
    expect(forged.status).toBe(303)
    expect(isSecure(sessionOf(forged))).toBe(false)
    expect(isSecure((await send("GET", "/-/signin", STRANGER, forwarded("198.51.100.20", "https"))).cookies[0])).toBe(false)
  }, 120_000)
})
