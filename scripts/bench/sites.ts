/**
 * Benchmark: site file requests per second (`GET /sites/<org>/style.css`, path-served, anonymous)
 * against `raw` (`GET /api/<org>/<repo>/raw/main/docs/style.css`, the same blob, anonymous) on the
 * same embedded server in the same run, in alternating rounds; prints req/s, p50, p99 and the ratio.
 *
 *   npm run bench:sites [-- --duration 5 --connections 32 --rounds 3]
 */
import { buildCommit, pushBody } from "../../test/support/content.ts"
import { startServer } from "../../test/support/GroveServer.ts"
import { api } from "../../test/support/http.ts"
import { line, load, numberArg, type Result } from "./load.ts"

const duration = numberArg("duration", 5)
const connections = numberArg("connections", 32)
const rounds = numberArg("rounds", 3)

const server = await startServer()
try {
  const a = api(server.url, await server.createUser("bench"))
  const check = (what: string, ok: boolean, body: unknown) => {
    if (!ok) throw new Error(`${what}: ${JSON.stringify(body)}`)
  }
  const org = await a.post("/orgs", { slug: "acme", name: "Acme" })
  check("org", org.status === 201, org.body)
  const repo = await a.post("/repos", { name: "www", organization_slug: "acme", is_public: true })
  check("repo", repo.status === 201, repo.body)
  const css = "body { color: green }\n".repeat(50)
  const c = buildCommit({ branch: "setup", files: { "docs/index.html": "<h1>hi</h1>\n", "docs/style.css": css } })
  const pushed = await a.post("/acme/www/push", pushBody({ branch: "setup", commits: [c], description: "Site" }))
  check("push", pushed.body?.success === true, pushed.body)
  check("merge", (await a.post("/acme/www/branches/setup/merge")).status === 200, "")
  const site = await a.put("/orgs/acme/site", { repo: "www", source_dir: "docs" })
  check("site", site.status === 200, site.body)

  const targets = {
    raw: `${server.url}/api/acme/www/raw/main/docs/style.css`,
    site: `${server.url}/sites/acme/style.css`
  }
  for (const url of Object.values(targets)) {
    const reply = await fetch(url)
    check(url, reply.status === 200 && (await reply.text()) === css, reply.status)
  }
  const options = { connections, duration }
  // Warm-up of both, then alternating rounds; the round with the median ratio is reported.
  await load(targets.raw, {}, { connections, duration: 1 })
  await load(targets.site, {}, { connections, duration: 1 })
  const measured: Array<{ raw: Result; site: Result }> = []
  for (let round = 0; round < rounds; round++) {
    const raw = await load(targets.raw, {}, options)
    const site = await load(targets.site, {}, options)
    measured.push({ raw, site })
  }
  measured.sort((x, y) => x.site.rps / x.raw.rps - y.site.rps / y.raw.rps)
  const median = measured[Math.floor(measured.length / 2)]!
  console.log(`site file requests vs raw, ${css.length}-byte file, ${connections} connections, ${duration} s x ${rounds} rounds (median round):`)
  console.log(line("raw (baseline)", median.raw))
  console.log(line("site", median.site))
  console.log(`ratio site/raw: ${(median.site.rps / median.raw.rps).toFixed(2)}x (rounds: ${measured.map((m) => (m.site.rps / m.raw.rps).toFixed(2)).join(", ")})`)
} finally {
  await server.stop()
}
