/**
 * Benchmark: `GET /api/{owner}/{name}` for an organization member, against the personal-owner case
 * in the same run (the baseline): roles and path permissions must not halve it. Three loads, back to
 * back, at the same concurrency on one embedded server:
 *   - owner:   a user reading a private repository of their personal organization (baseline);
 *   - member:  another user, a `member` of organization `acme`, reading its private repository;
 *   - member+perms: the same member reading a repository with `.oak/PERMISSIONS` on `main`.
 *
 *   npm run bench:org-read [-- --duration 10 --connections 64]
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { startServer } from "../../test/support/GroveServer.ts"
import { line, load, numberArg, type Result } from "./load.ts"

const duration = numberArg("duration", 10)
const connections = numberArg("connections", 64)

const call = async (url: string, key: string, method: string, body?: unknown) => {
  const response = await fetch(url, {
    method,
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) })
  })
  const text = await response.text()
  if (response.status >= 300) throw new Error(`${method} ${url}: ${response.status} ${text}`)
  return text === "" ? undefined : JSON.parse(text)
}

const main = async () => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "grove-bench-"))
  const server = await startServer({ dataDir })
  const api = `${server.url}/api`
  try {
    const ownerKey = await server.createUser("olga")
    const memberKey = await server.createUser("mia")
    await call(`${api}/repos`, ownerKey, "POST", { name: "solo" })
    await call(`${api}/orgs`, ownerKey, "POST", { slug: "acme", name: "Acme" })
    await call(`${api}/orgs/acme/members`, ownerKey, "POST", { username: "mia", role: "member" })
    await call(`${api}/repos`, ownerKey, "POST", { name: "plain", organization_slug: "acme" })
    await call(`${api}/repos`, ownerKey, "POST", { name: "guarded", organization_slug: "acme" })
    // A permissions file on main: proposed as a branch, then merged.
    const proposal = await call(`${api}/acme/guarded/path-permissions/propose`, ownerKey, "POST", {
      content: "/secret/ @acme/ops\n*.pem @olga\n",
      description: "Restrict secrets"
    }) as { branch: string }
    await call(`${api}/acme/guarded/branches/${encodeURIComponent(proposal.branch)}/merge`, ownerKey, "POST")
    const perms = await call(`${api}/acme/guarded/path-permissions`, memberKey, "GET") as { enforced: boolean }
    if (!perms.enforced) throw new Error("the permissions file is not enforced")

    const cases: ReadonlyArray<readonly [string, string, string]> = [
      ["owner (personal org)", `${api}/olga/solo`, ownerKey],
      ["org member", `${api}/acme/plain`, memberKey],
      ["org member, permissions", `${api}/acme/guarded`, memberKey]
    ]
    const results: Array<Result> = []
    for (const [, url, key] of cases) {
      const headers = { authorization: `Bearer ${key}` }
      await load(url, headers, { connections, duration: 2 })
      results.push(await load(url, headers, { connections, duration }))
    }
    console.log(`GET /api/{owner}/{name}, ${connections} connections, ${duration} s each, embedded mode`)
    cases.forEach(([name], i) => console.log(line(name, results[i]!)))
    const baseline = results[0]!.rps
    cases.slice(1).forEach(([name], i) =>
      console.log(`ratio ${name}/owner: ${(results[i + 1]!.rps / baseline).toFixed(2)}x (target >= 0.5x)`))
    if (results.some((r) => r.non2xx > 0 || r.errors > 0)) process.exitCode = 1
  } finally {
    await server.stop()
    fs.rmSync(dataDir, { recursive: true, force: true })
  }
}

await main()
