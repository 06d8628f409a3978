/**
 * `grove ci ...`: a repository's CI runs (`runs`, `show`, `logs [-f]`, `wait`, `trigger`,
 * `cancel`) and secrets (`secrets list|set|delete`). The repository is `--repo OWNER/NAME`, else
 * the checkout's. `logs -f` follows the server-sent events of `…/ci/runs/{id}/logs?follow=1`.
 */
import type { ApiCi } from "@grove/api"
import { Names } from "@grove/core"
import { Console, Effect, Option } from "effect"
import { randomUUID } from "node:crypto"
import { failure, networkFailure, usage } from "../Failures.ts"
import { openWorkspace } from "../local/Workspace.ts"
import { Output, table } from "../Output.ts"
import { connectRepo, type RemoteRepo, transfer } from "../sync/RemoteRepo.ts"
import { remoteOf } from "../sync/Session.ts"
import { currentBranch } from "../local/State.ts"
import { writeStderr, writeStdout } from "../Stdout.ts"
import { processTimeouts, wentSilent } from "../sync/HttpSend.ts"

/** The repository named by `--repo`, else the checkout's. */
export const target = Effect.fnUntraced(function*(remote: string, repo: Option.Option<string>) {
  if (Option.isSome(repo)) {
    const full = Names.parseFullName(repo.value)
    if (full === undefined) return yield* usage("--repo must be given as owner/name")
    return yield* connectRepo(remote, full.owner, full.name)
  }
  const opened = yield* openWorkspace().pipe(
    Effect.mapError(() => usage("not in a grove checkout: give the repository with --repo owner/name"))
  )
  return yield* remoteOf(opened.workspace)
})

const runId = (value: string) => /^[1-9][0-9]{0,17}$/.test(value) ? Effect.succeed(value) : Effect.fail(usage(`run id must be a positive integer, not ${JSON.stringify(value)}`))

const short = (hash: string) => hash.slice(0, 12)
const outcome = (run: Pick<ApiCi.CiRun, "status" | "conclusion">) => run.conclusion ?? run.status

const runTable = (runs: ReadonlyArray<ApiCi.CiRun>) =>
  runs.length === 0
    ? "No CI runs."
    : table(["ID", "STATE", "WORKFLOW", "EVENT", "BRANCH", "COMMIT", "QUEUED"], runs.map((r) => [
      String(r.id),
      outcome(r),
      r.workflow_name,
      r.event,
      r.branch,
      short(r.commit_hash),
      r.queued_at
    ]))

const runText = (run: ApiCi.CiRun, logs: boolean) =>
  [
    `Run ${run.id}: ${run.workflow_name} (${run.workflow_path}) on ${run.branch} at ${short(run.commit_hash)}, ${run.event} by ${run.triggered_by}`,
    `State: ${outcome(run)}${run.error === null ? "" : ` — ${run.error}`}`,
    ...(run.jobs ?? []).flatMap((job) => [
      `  job ${job.key}${job.name === job.key ? "" : ` (${job.name})`}: ${outcome(job)}`,
      ...job.steps.flatMap((step) => [
        `    ${step.name}: ${outcome(step)}${step.exit_code === null ? "" : ` (exit ${step.exit_code})`}`,
        ...(logs && step.logs !== undefined && step.logs.length > 0 ? [step.logs.replace(/^/gm, "      | ").replace(/\n {6}\| $/, "")] : [])
      ])
    ])
  ].join("\n")

export const runs = Effect.fn("Ci.runs")(function*(remote: string, input: { readonly repo: Option.Option<string>; readonly limit: number }) {
  const out = yield* Output
  if (!Number.isInteger(input.limit) || input.limit < 1 || input.limit > 200) return yield* usage("--limit must be 1 to 200")
  const repo = yield* target(remote, input.repo)
  const { call, client } = repo.connection
  const list = yield* call(client.ci.runs({ params: { owner: repo.owner, name: repo.name }, query: { limit: String(input.limit) } }))
  yield* out.result(list, () => runTable(list))
})

const getRun = (repo: RemoteRepo, id: string, logs: boolean) =>
  repo.connection.call(repo.connection.client.ci.run({ params: { owner: repo.owner, name: repo.name, id }, query: logs ? {} : { logs: "false" } }))

export const show = Effect.fn("Ci.show")(function*(remote: string, input: { readonly repo: Option.Option<string>; readonly id: string }) {
  const out = yield* Output
  const id = yield* runId(input.id)
  const repo = yield* target(remote, input.repo)
  const run = yield* getRun(repo, id, false)
  yield* out.result(run, () => runText(run, false))
})

/** Server-sent events, parsed as they arrive. */
const followLogs = (repo: RemoteRepo, id: string, onEvent: (event: string, data: Record<string, unknown>) => void) =>
  transfer("following the logs", async () => {
    const response = await repo.binary(`ci/runs/${id}/logs?follow=1`, { method: "GET" })
    const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader()
    // The server sends a keep-alive every 15 s: silence past the idle bound (sync/HttpSend.ts) is a server gone.
    const { idleMs } = processTimeouts()
    const read = () =>
      idleMs === 0 ? reader.read() : new Promise<Awaited<ReturnType<typeof reader.read>>>((resolve, reject) => {
        const timer = setTimeout(() => {
          reader.cancel().catch(() => undefined)
          // After the answer's headers: a connection was made.
          reject(networkFailure(repo.site, Object.assign(wentSilent(idleMs), { connected: true })))
        }, idleMs)
        reader.read().then(resolve, reject).finally(() => clearTimeout(timer))
      })
    let buffer = ""
    for (;;) {
      const { done, value } = await read()
      if (done) return
      buffer += value
      let end: number
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, end)
        buffer = buffer.slice(end + 2)
        const event = /^event: (.*)$/m.exec(block)?.[1]
        const data = /^data: (.*)$/m.exec(block)?.[1]
        if (event !== undefined && data !== undefined) onEvent(event, JSON.parse(data) as Record<string, unknown>)
      }
    }
  })

export const logs = Effect.fn("Ci.logs")(function*(remote: string, input: { readonly repo: Option.Option<string>; readonly id: string; readonly follow: boolean }) {
  const out = yield* Output
  const id = yield* runId(input.id)
  const repo = yield* target(remote, input.repo)
  if (!input.follow) {
    const run = yield* getRun(repo, id, true)
    return yield* out.result(run, () => runText(run, true))
  }
  const events: Array<{ event: string; data: Record<string, unknown> }> = []
  let end: Record<string, unknown> | undefined
  yield* followLogs(repo, id, (event, data) => {
    if (out.json) events.push({ event, data })
    else if (event === "log") writeStdout(String(data.text))
    else if (event === "step" && data.status === "running") writeStderr(`==> ${String(data.job)} / ${String(data.name)}\n`)
    else if (event === "step" && data.status === "completed") {
      writeStderr(`<== ${String(data.name)}: ${String(data.conclusion)}${data.exit_code === null ? "" : ` (exit ${String(data.exit_code)})`}\n`)
    }
    if (event === "end") end = data
  })
  if (out.json) yield* out.result({ events, end: end ?? null }, () => "")
  else if (end !== undefined) yield* Console.error(`Run ${id}: ${String(end.conclusion ?? end.status)}${end.error ? ` — ${String(end.error)}` : ""}`)
  if (end?.conclusion !== "success") return yield* failure(`run ${id} did not succeed (${String(end?.conclusion ?? end?.status ?? "unknown")})`, "ci_not_success")
})

export const wait = Effect.fn("Ci.wait")(function*(remote: string, input: { readonly repo: Option.Option<string>; readonly id: string; readonly timeoutMinutes: number }) {
  const out = yield* Output
  const id = yield* runId(input.id)
  const repo = yield* target(remote, input.repo)
  const deadline = Date.now() + input.timeoutMinutes * 60_000
  let run = yield* getRun(repo, id, false)
  while (run.status !== "completed") {
    if (Date.now() > deadline) return yield* failure(`run ${id} is still ${run.status} after ${input.timeoutMinutes} minute(s)`, "ci_timeout")
    yield* Effect.sleep("500 millis")
    run = yield* getRun(repo, id, false)
  }
  yield* out.result(run, () => runText(run, false))
  if (run.conclusion !== "success") return yield* failure(`run ${id} concluded ${run.conclusion ?? "without a conclusion"}${run.error === null ? "" : `: ${run.error}`}`, "ci_not_success")
})

export const trigger = Effect.fn("Ci.trigger")(function*(remote: string, input: {
  readonly repo: Option.Option<string>
  readonly workflow: Option.Option<string>
  readonly branch: Option.Option<string>
  readonly expectedCommit: Option.Option<string>
  readonly key: Option.Option<string>
}) {
  const out = yield* Output
  const repo = yield* target(remote, input.repo)
  const { call, client } = repo.connection
  const params = { owner: repo.owner, name: repo.name }
  let branch = Option.getOrUndefined(input.branch)
  if (branch === undefined && Option.isNone(input.repo)) {
    branch = yield* openWorkspace().pipe(Effect.map((opened) => currentBranch(opened.state).name), Effect.orElseSucceed(() => undefined))
  }
  const workflow = Option.getOrUndefined(input.workflow)
  if (Option.isSome(input.expectedCommit)) {
    const receipt = yield* call(client.ci.trigger({
      params,
      payload: {
        protocol: "ordinary_trigger_v1",
        expected_commit: input.expectedCommit.value,
        idempotency_key: Option.getOrElse(input.key, () => randomUUID()),
        branch: branch ?? "main",
        ...(workflow === undefined ? {} : { workflow })
      }
    }))
    return yield* out.result(receipt, () => `${receipt.replayed ? "Already started" : "Started"} run(s) ${receipt.run_ids.join(", ")} at ${short(receipt.commit_hash)}.`)
  }
  const started = yield* call(client.ci.start({
    params,
    payload: { ...(branch === undefined ? {} : { branch }), ...(workflow === undefined ? {} : { workflow }) }
  }))
  yield* out.result(started, () => `Started run(s) ${started.run_ids.join(", ")}. Follow with grove ci logs -f ${started.run_ids[0]}`)
})

export const cancel = Effect.fn("Ci.cancel")(function*(remote: string, input: { readonly repo: Option.Option<string>; readonly id: string }) {
  const out = yield* Output
  const id = yield* runId(input.id)
  const repo = yield* target(remote, input.repo)
  yield* repo.connection.call(repo.connection.client.ci.cancel({ params: { owner: repo.owner, name: repo.name, id } }))
  yield* out.result({ cancelled: Number(id) }, () => `Cancelled run ${id}.`)
})

export const secretsList = Effect.fn("Ci.secretsList")(function*(remote: string, input: { readonly repo: Option.Option<string> }) {
  const out = yield* Output
  const repo = yield* target(remote, input.repo)
  const list = yield* repo.connection.call(repo.connection.client.ci.secrets({ params: { owner: repo.owner, name: repo.name } }))
  yield* out.result(list, () => list.secrets.length === 0 ? "No secrets." : table(["NAME", "UPDATED", "BY"], list.secrets.map((s) => [s.name, s.updated_at, s.updated_by])))
})

/** The value is read from stdin (never from the command line, where the process list would show it). */
export const secretsSet = Effect.fn("Ci.secretsSet")(function*(remote: string, input: { readonly repo: Option.Option<string>; readonly name: string }) {
  const out = yield* Output
  const repo = yield* target(remote, input.repo)
  if (process.stdin.isTTY) yield* out.note(`Value of ${input.name} (end with Ctrl-D):`)
  const raw = yield* transfer("reading the value from stdin", async () => {
    const parts: Array<Buffer> = []
    for await (const part of process.stdin) parts.push(part as Buffer)
    return Buffer.concat(parts).toString("utf8")
  })
  // One trailing newline is the terminal's or echo's, not the secret's.
  const value = raw.replace(/\r?\n$/, "")
  if (value.length === 0) return yield* usage("the secret's value (read from stdin) is empty")
  const saved = yield* repo.connection.call(repo.connection.client.ci.setSecret({ params: { owner: repo.owner, name: repo.name }, payload: { name: input.name, value } }))
  yield* out.result(saved, () => `Saved secret ${saved.name}.`)
})

export const secretsDelete = Effect.fn("Ci.secretsDelete")(function*(remote: string, input: { readonly repo: Option.Option<string>; readonly name: string }) {
  const out = yield* Output
  const repo = yield* target(remote, input.repo)
  yield* repo.connection.call(repo.connection.client.ci.deleteSecret({ params: { owner: repo.owner, name: repo.name, secret: input.name } }))
  yield* out.result({ deleted: input.name }, () => `Deleted secret ${input.name}.`)
})

