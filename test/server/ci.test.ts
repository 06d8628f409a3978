/**
 * Native CI end to end on the embedded server: workflows pushed with the repository run on the
 * branch.created event, in `needs` order, each step in its sandbox in a pseudo-terminal as an unprivileged user
 * (the suite runs as root here), with exit codes, timeouts, masking of secrets, cancel (the
 * process group dies), the exact-head trigger's answers, live logs over server-sent events, and
 * the merge gate reading the runs.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as path from "node:path"
import { buildCommit, pushBody } from "../support/content.ts"
import { type GroveServer, startServer } from "../support/GroveServer.ts"
import { api } from "../support/http.ts"
import { waitFor } from "../support/waitFor.ts"

let server: GroveServer
const tokens: Record<string, string> = {}
const as = (user: string) => api(server.url, tokens[user])
const SECRET = "hunter2 s3cr3t/value+x"

const WORKFLOWS: Record<string, string> = {
  // No `on`: every event.
  ".oak/workflows/pass.yml": [
    "env:",
    "  GREETING: hello",
    "jobs:",
    "  second:",
    "    needs: first",
    "    steps:",
    "      - run: echo second; cat message.txt",
    "  first:",
    "    steps:",
    "      - name: greet",
    "        run: echo \"$GREETING from $(whoami) in $GROVE_REPOSITORY\"",
    "      - run: env | sort",
    "  independent:",
    "    steps:",
    "      - run: echo independent"
  ].join("\n"),
  ".oak/workflows/fail.yml": [
    "on: [manual]",
    "jobs:",
    "  build:",
    "    steps:",
    "      - run: echo before; exit 3",
    "      - run: echo never",
    "  after:",
    "    needs: [build]",
    "    steps:",
    "      - run: echo never either"
  ].join("\n"),
  ".oak/workflows/timeout.yml": [
    "on: manual",
    "jobs:",
    "  slow:",
    "    steps:",
    "      - run: echo sleeping; sleep 30",
    "        timeout-minutes: 0.03"
  ].join("\n"),
  ".oak/workflows/jobtimeout.yml": [
    "on: manual",
    "jobs:",
    "  slow:",
    "    timeout-minutes: 0.03",
    "    steps:",
    "      - run: sleep 30",
    "        timeout-minutes: 5"
  ].join("\n"),
  ".oak/workflows/secret.yml": [
    "on: [manual]",
    "jobs:",
    "  leak:",
    "    steps:",
    "      - run: |",
    "          echo \"plain=$API_TOKEN\"",
    "          printf '%s' \"$API_TOKEN\" | base64 -w0; echo",
    "          printf '%s\\n' \"$API_TOKEN\" | sed 's/ /%20/g; s|/|%2F|g; s/+/%2B/g'"
  ].join("\n"),
  ".oak/workflows/slow.yml": [
    "on: [manual]",
    "jobs:",
    "  wait:",
    "    steps:",
    "      - run: |",
    "          sleep \"$SLEEP_MARK\" &",
    "          for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do echo tick $i; sleep 0.5; done",
    "          sleep 300"
  ].join("\n"),
  ".oak/workflows/invalid.yml": ["on: [manual]", "jobs:", "  build:", "    stepz:", "      - run: x"].join("\n"),
  "message.txt": "from the checkout\n"
}

const completed = (id: number) =>
  waitFor(`run ${id}`, async () => {
    const reply = await as("olga").get(`/acme/app/ci/runs/${id}`)
    return reply.body.status === "completed" ? reply.body : undefined
  })

const start = async (workflow: string, branch = "setup") => {
  const reply = await as("olga").post("/acme/app/ci/runs", { workflow, branch })
  expect(reply.status, JSON.stringify(reply.body)).toBe(201)
  return reply.body.run_ids[0] as number
}

const readCmdline = (pid: string) => {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, "utf8")
  } catch {
    return ""
  }
}

const METRICS_TOKEN = "ci-metrics-3f9a-b27c"
/** The server's runners busy now (reserved or running a run). */
const runnersBusy = async () => {
  const text = await (await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })).text()
  const line = text.split("\n").find((l) => l.startsWith("grove_ci_runner_slots_busy"))
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(" ") + 1))
}

const stepLogs = (run: any) => run.jobs.flatMap((job: any) => job.steps).map((step: any) => step.logs).join("")

let head: string

beforeAll(async () => {
  server = await startServer({ args: ["--ci-concurrency", "4", "--metrics-token", METRICS_TOKEN], env: { GROVE_TEST_CANARY: "server-only-canary" } })
  for (const user of ["olga", "rita"]) tokens[user] = await server.createUser(user)
  expect((await as("olga").post("/orgs", { slug: "acme", name: "Acme" })).status).toBe(201)
  expect((await as("olga").post("/orgs/acme/members", { username: "rita" })).status).toBe(201)
  expect((await as("olga").post("/repos", { name: "app", organization_slug: "acme" })).status).toBe(201)
  const secret = await as("olga").raw("PUT", "/acme/app/ci/secrets", { name: "API_TOKEN", value: SECRET })
  expect(secret.status, JSON.stringify(secret.body)).toBe(200)
  const c = buildCommit({ branch: "setup", files: WORKFLOWS })
  head = c.commit.hash
  const pushed = await as("olga").post("/acme/app/push", pushBody({ branch: "setup", commits: [c], description: "Setup" }))
  expect(pushed.body.success, JSON.stringify(pushed.body)).toBe(true)
}, 300_000)

afterAll(async () => {
  await server?.stop()
})

describe("CI runs", () => {
  it("runs the workflows a new branch triggers, jobs in needs order, as an unprivileged user, with a clean environment", async () => {
    const runs = await waitFor("the branch.created run", async () => {
      const list = await as("olga").get("/acme/app/ci/runs")
      return list.body.length > 0 ? list.body : undefined
    })
    // Only the workflow without `on` (every event) and the invalid file run on branch.created.
    expect(runs.map((r: any) => r.workflow_name).sort()).toEqual(["invalid", "pass"])
    const invalid = runs.find((r: any) => r.workflow_name === "invalid")
    expect(invalid).toMatchObject({ status: "completed", conclusion: "failure", event: "branch.created", branch: "setup", commit_hash: head })
    expect(invalid.error).toBe(".oak/workflows/invalid.yml:4: unknown key 'stepz' in job 'build' (allowed: name, needs, env, timeout-minutes, cache, network, steps)")
    const pass = await completed(runs.find((r: any) => r.workflow_name === "pass").id)
    expect(pass).toMatchObject({ conclusion: "success", event: "branch.created", triggered_by: "olga", workflow_path: ".oak/workflows/pass.yml" })
    const jobs = Object.fromEntries(pass.jobs.map((j: any) => [j.key, j]))
    // In dependency order, ties in file order.
    expect(Object.keys(jobs)).toEqual(["first", "second", "independent"])
    const first = jobs.first.steps
    expect(first[0].logs).toContain("hello from nobody in acme/app")
    expect(first[0]).toMatchObject({ name: "greet", status: "completed", conclusion: "success", exit_code: 0 })
    expect(jobs.second.steps[0].logs).toContain("from the checkout")
    expect(new Date(jobs.second.steps[0].started_at).getTime()).toBeGreaterThanOrEqual(new Date(first[1].finished_at).getTime())
    // The step's environment: the workflow's and the runner's, none of the server's own.
    const env = first[1].logs
    expect(env).toContain("GROVE_COMMIT=" + head)
    expect(env).toContain("API_TOKEN=***")
    expect(env).not.toContain("server-only-canary")
    expect(env).not.toContain(SECRET)
    // Logs are JSON strings whatever the step printed (the body parsed).
    expect(typeof first[1].logs).toBe("string")
  }, 90_000)

  it("records a failing step's exit code, skips what follows and the jobs that need it", async () => {
    const run = await completed(await start("fail"))
    expect(run.conclusion).toBe("failure")
    const [build, after] = run.jobs
    expect(build.steps[0]).toMatchObject({ exit_code: 3, conclusion: "failure" })
    expect(build.steps[0].logs).toContain("before")
    expect(build.steps[1]).toMatchObject({ conclusion: "skipped", exit_code: null })
    expect(after).toMatchObject({ status: "completed", conclusion: "skipped" })
  }, 60_000)

  it("kills a step at its timeout and concludes timed_out", async () => {
    const started = Date.now()
    const run = await completed(await start("timeout"))
    expect(Date.now() - started).toBeLessThan(20_000)
    expect(run.conclusion).toBe("timed_out")
    expect(run.jobs[0].steps[0]).toMatchObject({ conclusion: "timed_out", exit_code: null })
    expect(run.jobs[0].steps[0].logs).toMatch(/sleeping[\s\S]*timed out after 1\.8 s/)
    expect(run.jobs[0].steps[0].logs).toContain("the step timed out after 1.8 s")
    // A job's limit shorter than its step's: the job's ends it, and the log says so.
    const job = await completed(await start("jobtimeout"))
    expect(job.conclusion).toBe("timed_out")
    expect(job.jobs[0].steps[0].logs).toContain("the job timed out after")
  }, 60_000)

  it("masks secrets in the logs, plain, base64 and URL-encoded", async () => {
    const run = await completed(await start("secret"))
    const logs = stepLogs(run)
    expect(logs).toContain("plain=***")
    expect(logs).not.toContain(SECRET)
    expect(logs).not.toContain(Buffer.from(SECRET).toString("base64"))
    expect(logs).not.toContain(encodeURIComponent(SECRET))
    expect(logs.split("***").length).toBe(4)
  }, 60_000)

  it("answers a manual start on a node with a free runner with its run already started there", async () => {
    const id = await start("fail")
    // The queuing command recorded it as started by this node (no Start command, no claim by a dispatcher).
    const run = (await as("olga").get(`/acme/app/ci/runs/${id}?logs=false`)).body
    expect(["running", "completed"], JSON.stringify(run)).toContain(run.status)
    expect(run.started_at, JSON.stringify(run)).not.toBeNull()
    expect((await completed(id)).conclusion).toBe("failure")
  }, 60_000)

  // A start at the head is planned at the head this node last saw (a start's read, a push's event) and queued only
  // while it is still the head (CiHandlers, CiWake.head): a push right before moves it, and the run is at the new one.
  it("starts a manual run at the head a push just moved the branch to", async () => {
    let parent: ReturnType<typeof buildCommit> | undefined
    for (let round = 0; round < 3; round++) {
      const c = buildCommit({
        branch: "moving",
        files: { ".oak/workflows/fail.yml": WORKFLOWS[".oak/workflows/fail.yml"]!, "message.txt": `round ${round}\n` },
        ...(parent === undefined ? {} : { parent })
      })
      const pushed = await as("olga").post("/acme/app/push", pushBody({ branch: "moving", commits: [c], description: `Round ${round}` }))
      expect(pushed.body.success, JSON.stringify(pushed.body)).toBe(true)
      const id = await start("fail", "moving")
      expect((await as("olga").get(`/acme/app/ci/runs/${id}?logs=false`)).body.commit_hash, `round ${round}`).toBe(c.commit.hash)
      expect((await completed(id)).conclusion).toBe("failure")
      parent = c
    }
  }, 60_000)

  // The tree of a published commit is kept by repository and commit (WorkflowFiles): another repository's commit,
  // started in its own first, is still not this one's.
  it("answers 404 for a start at another repository's commit, also once that commit ran in its own", async () => {
    expect((await as("olga").post("/repos", { name: "other", organization_slug: "acme" })).status).toBe(201)
    const c = buildCommit({ branch: "elsewhere", files: WORKFLOWS })
    expect((await as("olga").post("/acme/other/push", pushBody({ branch: "elsewhere", commits: [c], description: "Other" }))).body.success).toBe(true)
    const own = await as("olga").post("/acme/other/ci/runs", { workflow: "fail", branch: "elsewhere", commit: c.commit.hash })
    expect(own.status, JSON.stringify(own.body)).toBe(201)
    for (let i = 0; i < 2; i++) {
      const reply = await as("olga").post("/acme/app/ci/runs", { workflow: "fail", branch: "setup", commit: c.commit.hash })
      expect(reply.status, JSON.stringify(reply.body)).toBe(404)
      expect(reply.body.error).toContain("not found")
    }
    await waitFor("the other repository's run completed", async () =>
      (await as("olga").get(`/acme/other/ci/runs/${own.body.run_ids[0]}?logs=false`)).body.status === "completed" || undefined, 60_000)
  }, 60_000)

  it("runs a manual start sent twice with one Idempotency-Key once (the replayed answer starts nothing)", async () => {
    await waitFor("no runner busy", async () => (await runnersBusy()) === 0 || undefined, 60_000)
    const headers = { "idempotency-key": `once-${Date.now()}` }
    const first = await as("olga").post("/acme/app/ci/runs", { workflow: "slow", branch: "setup" }, headers)
    expect(first.status, JSON.stringify(first.body)).toBe(201)
    const id = first.body.run_ids[0] as number
    // The run holds its runner (its step sleeps) while the same request comes again (as grove's retry sends it).
    expect(await runnersBusy()).toBe(1)
    const again = await as("olga").post("/acme/app/ci/runs", { workflow: "slow", branch: "setup" }, headers)
    expect(again.status, JSON.stringify(again.body)).toBe(201)
    expect(again.body.run_ids).toEqual([id])
    // The replay's reservation was given back before it answered: no second runner runs the run.
    expect(await runnersBusy()).toBe(1)
    await waitFor(`run ${id}'s first tick`, async () => {
      const run = (await as("olga").get(`/acme/app/ci/runs/${id}`)).body
      return stepLogs(run).includes("tick 1\n") || undefined
    }, 60_000)
    expect((await as("olga").post(`/acme/app/ci/runs/${id}/cancel`)).status).toBe(204)
    const run = await completed(id)
    expect(run.conclusion).toBe("cancelled")
    expect(stepLogs(run).split("tick 1\n").length, stepLogs(run)).toBe(2)
    await waitFor("the runner free again", async () => (await runnersBusy()) === 0 || undefined, 60_000)
  }, 120_000)

  it("answers an invalid workflow file with a run that failed at once, naming the file and line", async () => {
    const run = await completed(await start("invalid"))
    expect(run).toMatchObject({ conclusion: "failure", jobs: [] })
    expect(run.error).toMatch(/^\.oak\/workflows\/invalid\.yml:4: unknown key 'stepz'/)
  })
})

describe("cancel and live logs", () => {
  it("streams a running step's output as server-sent events, then cancels the run and kills its process group", async () => {
    // The slow workflow's background child sleeps this long: the host finds it by its command line
    // (inside its sandbox the step sees only its own PID namespace).
    const mark = 900_000 + Math.floor(Math.random() * 90_000)
    const secret = await as("olga").raw("PUT", "/acme/app/ci/secrets", { name: "SLEEP_MARK", value: String(mark) })
    expect(secret.status).toBe(200)
    const children = () => fs.readdirSync("/proc").filter((pid) => /^\d+$/.test(pid) && readCmdline(pid) === `sleep\0${mark}\0`)
    const id = await start("slow")
    const response = await fetch(`${server.url}/api/acme/app/ci/runs/${id}/logs?follow=1`, { headers: { authorization: `Bearer ${tokens.olga}` } })
    expect(response.headers.get("content-type")).toContain("text/event-stream")
    const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader()
    let seen = ""
    const logText = () => [...seen.matchAll(/^event: log\ndata: (.*)$/gm)].map((m) => JSON.parse(m[1]!).text).join("")
    while (!logText().includes("tick 2\n")) {
      const { value, done } = await reader.read()
      if (done) break
      seen += value
    }
    expect(seen).toMatch(/event: step\ndata: \{"step_id":\d+,"job":"wait"[^\n]*"status":"running"/)
    expect(seen).toContain("event: log")
    expect(children()).toHaveLength(1)
    const cancel = await as("olga").post(`/acme/app/ci/runs/${id}/cancel`)
    expect(cancel.status).toBe(204)
    // The stream ends with the run's end.
    for (;;) {
      const { value, done } = await reader.read()
      if (done) break
      seen += value
    }
    expect(seen).toMatch(/event: end\ndata: \{"status":"completed","conclusion":"cancelled"/)
    const run = await completed(id)
    expect(run.conclusion).toBe("cancelled")
    await waitFor("the step's processes to die", async () => (children().length === 0 ? true : undefined), 10_000)
    // Cancelling again: 409, and the conclusion stays.
    const again = await as("olga").post(`/acme/app/ci/runs/${id}/cancel`)
    expect(again.status).toBe(409)
    expect(again.body.code).toBe("run_finished")
    expect((await as("olga").get(`/acme/app/ci/runs/${id}`)).body.conclusion).toBe("cancelled")
    const audit = await as("olga").get("/orgs/acme/audit")
    expect(JSON.stringify(audit.body)).toContain("ci.run.cancel")
  }, 90_000)
})

describe("the exact-head trigger", () => {
  const trigger = (body: Record<string, unknown>) =>
    as("olga").post("/acme/app/ci/trigger", { protocol: "ordinary_trigger_v1", branch: "setup", workflow: "fail", ...body })

  it("advertises itself, starts runs at the expected head and replays the same key", async () => {
    expect((await as("olga").get("/acme/app/ci/capabilities")).body).toEqual({ ordinary_trigger_v1: 1 })
    const first = await trigger({ expected_commit: head, idempotency_key: "key-1" })
    expect(first.status, JSON.stringify(first.body)).toBe(200)
    expect(first.body).toMatchObject({ protocol: "ordinary_trigger_v1", branch: "setup", commit_hash: head, replayed: false })
    expect(first.body.run_ids).toHaveLength(1)
    const again = await trigger({ expected_commit: head, idempotency_key: "key-1" })
    expect(again.body).toEqual({ ...first.body, replayed: true })
    const reused = await trigger({ expected_commit: head, idempotency_key: "key-1", workflow: "pass" })
    expect(reused.status).toBe(409)
  })

  it("refuses a moved head (412) and malformed requests (400)", async () => {
    expect((await trigger({ expected_commit: "a".repeat(64), idempotency_key: "key-2" })).status).toBe(412)
    expect((await trigger({ expected_commit: head.toUpperCase(), idempotency_key: "key-3" })).status).toBe(400)
    expect((await trigger({ expected_commit: head.slice(0, 63), idempotency_key: "key-3" })).status).toBe(400)
    expect((await trigger({ expected_commit: head })).status).toBe(400)
    expect((await trigger({ expected_commit: head, idempotency_key: "key-4", protocol: "other" })).status).toBe(400)
    expect((await trigger({ expected_commit: head, idempotency_key: "key-5", workflow: "nope" })).status).toBe(404)
  })
})

describe("access, secrets and the gate", () => {
  it("lets readers read, writers write, and hides secret values", async () => {
    const key = await as("olga").post("/api-keys", { name: "reader", scope: "read" })
    expect(key.status, JSON.stringify(key.body)).toBe(201)
    const reader = api(server.url, key.body.key)
    expect((await reader.get("/acme/app/ci/runs")).status).toBe(200)
    const denied = await reader.post("/acme/app/ci/runs", { workflow: "pass" })
    expect(denied.status).toBe(403)
    expect(denied.body.error).toContain("write")
    expect((await reader.raw("PUT", "/acme/app/ci/secrets", { name: "X_KEY", value: "v" })).status).toBe(403)
    expect((await api(server.url).get("/acme/app/ci/runs")).status).toBe(404)
    const listed = await as("rita").get("/acme/app/ci/secrets")
    expect(listed.body.secrets.map((s: any) => s.name)).toEqual(["API_TOKEN", "SLEEP_MARK"])
    expect(JSON.stringify(listed.body)).not.toContain(SECRET)
    expect(fs.readFileSync(path.join(server.dataDir, "secret.key"), "utf8").trim()).toHaveLength(44)
    expect((await as("olga").get("/acme/app/ci/runs?limit=0")).status).toBe(400)
    expect((await as("olga").get("/acme/app/ci/runs?limit=201")).status).toBe(400)
    expect((await as("olga").get("/acme/app/ci/runs?limit=200")).status).toBe(200)
    expect((await as("olga").delete("/acme/app/ci/secrets/SLEEP_MARK")).status).toBe(204)
    expect((await as("olga").delete("/acme/app/ci/secrets/SLEEP_MARK")).status).toBe(404)
  })

  it("holds a merge while CI on the branch head fails, and force=1 overrides it (audited)", async () => {
    // The gate reads the newest run per workflow at the head: `fail` failed there.
    const held = await as("olga").post("/acme/app/branches/setup/merge")
    expect(held.status, JSON.stringify(held.body)).toBe(412)
    const forced = await as("olga").post("/acme/app/branches/setup/merge?force=1")
    expect(forced.status, JSON.stringify(forced.body)).toBe(200)
    const audit = await as("olga").get("/orgs/acme/audit")
    expect(JSON.stringify(audit.body)).toContain("branch.merge.forced")
    // The merge starts the workflows that run on merge, on main, at the squash commit.
    await waitFor("the merge run", async () => {
      const list = await as("olga").get("/acme/app/ci/runs")
      return list.body.find((r: any) => r.event === "merge" && r.branch === "main" && r.commit_hash === forced.body.commit_hash)
    })
  }, 60_000)
})

describe("limits", () => {
  let small: GroveServer
  let key: string

  beforeAll(async () => {
    small = await startServer({ args: ["--ci-concurrency", "1", "--ci-queue-limit", "1", "--ci-step-output-limit-bytes", "2000"] })
    key = await small.createUser("lena")
    const lena = api(small.url, key)
    expect((await lena.post("/repos", { name: "lim" })).status).toBe(201)
    const c = buildCommit({
      branch: "main-setup",
      files: {
        ".oak/workflows/hold.yml": "on: [manual]\njobs:\n  a:\n    steps:\n      - run: sleep 30\n",
        ".oak/workflows/loud.yml": "on: [manual]\njobs:\n  a:\n    steps:\n      - run: for i in $(seq 1 500); do echo line-$i-padding-padding; done\n"
      }
    })
    expect((await lena.post("/lena/lim/push", pushBody({ branch: "main-setup", commits: [c], description: "Limits" }))).body.success).toBe(true)
  }, 120_000)

  afterAll(async () => {
    await small?.stop()
  })

  it("answers 503 with retryable when the queue is full, and caps a step's output with a marker", async () => {
    const lena = api(small.url, key)
    const start = (workflow: string) => lena.post("/lena/lim/ci/runs", { workflow, branch: "main-setup" })
    const holding = (await start("hold")).body.run_ids[0]
    // The one runner takes it; the next waits in the queue, which then is full.
    await waitFor("the hold run to start", async () => ((await lena.get(`/lena/lim/ci/runs/${holding}`)).body.status === "running" ? true : undefined))
    const queued = await start("loud")
    expect(queued.status).toBe(201)
    const full = await start("loud")
    expect(full.status).toBe(503)
    expect(full.body).toMatchObject({ code: "queue_full", retryable: true })
    const head = (await lena.get("/lena/lim/branches/main-setup")).body.head
    const trigger = await lena.post("/lena/lim/ci/trigger", {
      protocol: "ordinary_trigger_v1",
      expected_commit: head,
      idempotency_key: "full-1",
      branch: "main-setup",
      workflow: "loud"
    })
    expect(trigger.status).toBe(503)
    expect(trigger.body.retryable).toBe(true)
    expect((await lena.post(`/lena/lim/ci/runs/${holding}/cancel`)).status).toBe(204)
    const loud = await waitFor("the loud run", async () => {
      const run = (await lena.get(`/lena/lim/ci/runs/${queued.body.run_ids[0]}`)).body
      return run.status === "completed" ? run : undefined
    })
    expect(loud.conclusion).toBe("success")
    const logs: string = loud.jobs[0].steps[0].logs
    expect(logs).toContain("line-1-padding")
    expect(logs).not.toContain("line-500-")
    expect(logs).toContain("[grove: output truncated: this step printed more than 2000 bytes; the rest was discarded]")
    expect(Buffer.byteLength(logs)).toBeLessThan(2200)
  }, 90_000)
})
