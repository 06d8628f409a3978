/**
 * The workflow file (`.oak/workflows/<name>.yml` or `.yaml`): parsed with the `yaml` library and
 * validated key by key, so an invalid file becomes a run that fails at once with an error naming
 * the file and the line (`path:line: message`) instead of being skipped. Pure: no I/O.
 */
import { type Alias, type Document, isAlias, isMap, isScalar, isSeq, LineCounter, type Node, parseAllDocuments, type Pair, visit, type YAMLMap } from "yaml"

export type WorkflowEvent = "push" | "merge" | "manual" | "branch.created"
export const WORKFLOW_EVENTS: ReadonlyArray<WorkflowEvent> = ["push", "merge", "manual", "branch.created"]

export interface WorkflowCache {
  readonly key: string
  readonly paths: ReadonlyArray<string>
}
export interface WorkflowStep {
  /** Defaults to the first line of `run`, cut to 80 characters. */
  readonly name: string
  readonly run: string
  readonly env: Readonly<Record<string, string>>
  readonly timeoutMinutes: number | undefined
  readonly continueOnError: boolean
}
export interface WorkflowJob {
  /** The key under `jobs`. */
  readonly id: string
  /** Defaults to the id. */
  readonly name: string
  readonly needs: ReadonlyArray<string>
  readonly env: Readonly<Record<string, string>>
  readonly timeoutMinutes: number | undefined
  readonly cache: WorkflowCache | undefined
  /** Whether steps reach the network: the job's `network`, else the workflow's, else true. */
  readonly network: boolean
  readonly steps: ReadonlyArray<WorkflowStep>
}
export interface Workflow {
  /** The file's stem. */
  readonly name: string
  readonly path: string
  readonly on: ReadonlyArray<WorkflowEvent>
  readonly env: Readonly<Record<string, string>>
  /** In dependency order: a job comes after every job it needs; ties in file order. */
  readonly jobs: ReadonlyArray<WorkflowJob>
}
export type ParsedWorkflow =
  | { readonly _tag: "Valid"; readonly workflow: Workflow }
  | { readonly _tag: "Invalid"; readonly name: string; readonly path: string; readonly error: string }

const MAX_TEXT_BYTES = 256 * 1024
const MAX_JOBS = 100
const MAX_STEPS = 200
const MAX_RUN_BYTES = 64 * 1024
const MAX_NAME = 200
const MAX_TIMEOUT_MINUTES = 1440
const DEFAULT_STEP_NAME = 80
// Values read, counting each through every alias to it: a file within MAX_TEXT_BYTES has fewer (every value
// takes two bytes or more), so only an alias bomb reaches it.
const MAX_READS = 256 * 1024
const DEFAULT_ON: ReadonlyArray<WorkflowEvent> = ["push", "branch.created", "merge", "manual"]

const TOP_KEYS = ["on", "env", "network", "jobs"]
const JOB_KEYS = ["name", "needs", "env", "timeout-minutes", "cache", "network", "steps"]
const STEP_KEYS = ["name", "run", "env", "timeout-minutes", "continue-on-error"]
const CACHE_KEYS = ["key", "paths"]

const WORKFLOW_PATH = /^\.oak\/workflows\/([^/]+)\.(?:yml|yaml)$/
const JOB_ID = /^[A-Za-z0-9_-]{1,64}$/
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/
// oxlint-disable-next-line no-control-regex -- finding control characters is the point
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/

/** True for `.oak/workflows/<stem>.yml` or `.yaml` directly in that folder, stem non-empty. */
export const isWorkflowPath = (path: string): boolean => WORKFLOW_PATH.test(path)

/** The stem: ".oak/workflows/ci.yml" -> "ci". */
export const workflowName = (path: string): string =>
  WORKFLOW_PATH.exec(path)?.[1] ?? path.slice(path.lastIndexOf("/") + 1).replace(/\.(?:yml|yaml)$/, "")

/** A validation failure at a node (line 1 without one); its line is looked up when it is reported. */
class Invalid {
  readonly node: Node | null
  readonly message: string
  constructor(node: Node | null, message: string) {
    this.node = node
    this.message = message
  }
}

const fail = (node: Node | null, message: string): never => {
  throw new Invalid(node, message)
}

/** Parses and validates one workflow file's text. Never throws. */
export const parseWorkflow = (path: string, text: string): ParsedWorkflow => {
  const name = workflowName(path)
  const invalid = (line: number, message: string): ParsedWorkflow => ({ _tag: "Invalid", name, path, error: `${path}:${line}: ${message}` })
  // A string has at most as many UTF-16 units as UTF-8 bytes, so a long one is refused without encoding it.
  if (text.length > MAX_TEXT_BYTES || utf8Bytes(text) > MAX_TEXT_BYTES) return invalid(1, `the file is larger than ${MAX_TEXT_BYTES / 1024} KiB`)
  const lines = new LineCounter()
  const lineOf = (offset: number | undefined): number => (offset === undefined ? 1 : lines.linePos(offset).line)
  try {
    // stringKeys: keys are read as written, so `on`, `123` or `~` never become a boolean, a number or null.
    // uniqueKeys off: yaml compares every key with every other; the Reader finds duplicates with a Map instead.
    const docs = parseAllDocuments(text, { lineCounter: lines, prettyErrors: false, stringKeys: true, uniqueKeys: false })
    const doc = docs[0]
    if (doc === undefined) return invalid(1, "the file is empty: a workflow needs 'jobs'")
    const problem = doc.errors[0]
    if (problem !== undefined) return invalid(lineOf(problem.pos[0]), `invalid YAML: ${problem.message.split("\n")[0]}`)
    const second = docs[1]
    if (second !== undefined) return invalid(lineOf(second.range[0]), "a workflow file holds one YAML document, not several")
    return { _tag: "Valid", workflow: new Reader(doc).workflow(name, path) }
  } catch (error) {
    if (error instanceof Invalid) return invalid(lineOf(error.node?.range?.[0]), error.message)
    // "Never throws": a failure inside the YAML library still becomes an invalid file.
    return invalid(1, `invalid YAML: ${error instanceof Error ? error.message.split("\n")[0] : String(error)}`)
  }
}

/** A map entry: its key's node, where an absent value (`? key`, `{key}`) is reported, and its value with aliases resolved. */
interface Field {
  readonly key: Node
  readonly value: Node | null
}

const at = (field: Field): Node => field.value ?? field.key

/** A job as read, with its key's node for the cycle error. */
interface ReadJob {
  readonly job: WorkflowJob
  readonly key: Node
}

/** Reads one parsed document, counting the values read (through aliases too) against MAX_READS. */
class Reader {
  readonly doc: Document.Parsed
  readonly targets: ReadonlyMap<Alias, Node>
  reads = 0
  lastAlias: Alias | null = null
  constructor(doc: Document.Parsed) {
    this.doc = doc
    this.targets = aliasTargets(doc)
  }

  resolve(node: unknown): Node | null {
    if (++this.reads > MAX_READS) fail(this.lastAlias, `aliases expand the file beyond ${MAX_READS} values`)
    if (!isAlias(node)) return isScalar(node) || isMap(node) || isSeq(node) ? node : null
    this.lastAlias = node
    // An anchored node is never an alias itself (yaml refuses `&a *b`), so one step resolves it.
    return this.targets.get(node) ?? fail(node, `alias '*${node.source}' has no anchor before it`)
  }

  key(pair: Pair, map: Node): { readonly node: Node; readonly name: string } {
    // With stringKeys yaml reports any other key as a syntax error, so this is a scalar holding a string.
    return isScalar(pair.key) ? { node: pair.key, name: String(pair.key.value) } : { node: map, name: "" }
  }

  /** The map's entries by key, refusing keys outside `allowed`. */
  fields(map: YAMLMap, what: string, allowed: ReadonlyArray<string>): Map<string, Field> {
    const out = new Map<string, Field>()
    for (const pair of map.items) {
      const key = this.key(pair, map)
      if (!allowed.includes(key.name)) fail(key.node, `unknown key '${key.name}' in ${what} (allowed: ${allowed.join(", ")})`)
      if (out.has(key.name)) fail(key.node, `duplicate key '${key.name}' in ${what}`)
      out.set(key.name, { key: key.node, value: this.resolve(pair.value) })
    }
    return out
  }

  workflow(name: string, path: string): Workflow {
    const root = this.resolve(this.doc.contents)
    if (!isMap(root)) return fail(root, "a workflow must be a map with 'jobs' (and optionally 'on', 'env' and 'network')")
    const top = this.fields(root, "the workflow", TOP_KEYS)
    const onField = top.get("on")
    const envField = top.get("env")
    const jobsField = top.get("jobs")
    const on = onField === undefined ? DEFAULT_ON : this.on(onField)
    const env = envField === undefined ? {} : this.env(envField, "the workflow's env")
    const networkField = top.get("network")
    const network = networkField === undefined ? true : flag(networkField, "the workflow's 'network'")
    if (jobsField === undefined) return fail(root, "a workflow needs 'jobs'")
    const jobsMap = jobsField.value
    if (!isMap(jobsMap) || jobsMap.items.length === 0) return fail(at(jobsField), "'jobs' must be a map of at least one job")
    // All ids first, so that a job may need one written below it.
    const ids = new Set(jobsMap.items.map((pair) => this.key(pair, jobsMap).name))
    const seen = new Set<string>()
    const jobs = jobsMap.items.map((pair, index): ReadJob => {
      const key = this.key(pair, jobsMap)
      if (!JOB_ID.test(key.name)) fail(key.node, `job id '${key.name}' must be 1-64 letters, digits, '_' or '-'`)
      if (seen.has(key.name)) fail(key.node, `duplicate job id '${key.name}'`)
      if (index >= MAX_JOBS) fail(key.node, `a workflow may have at most ${MAX_JOBS} jobs`)
      seen.add(key.name)
      return { job: this.job(key.name, { key: key.node, value: this.resolve(pair.value) }, ids, network), key: key.node }
    })
    return { name, path, on, env, jobs: order(jobs) }
  }

  on(field: Field): ReadonlyArray<WorkflowEvent> {
    const one = (node: Node | null, where: Node): WorkflowEvent => {
      const event = WORKFLOW_EVENTS.find((candidate) => isScalar(node) && node.value === candidate)
      return event ?? fail(node ?? where, `'on' takes ${WORKFLOW_EVENTS.join(", ")} (or a list of them), not ${describe(node)}`)
    }
    const list = field.value
    if (!isSeq(list)) return [one(list, field.key)]
    if (list.items.length === 0) fail(list, "'on' must name at least one event")
    return [...new Set(list.items.map((item) => one(this.resolve(item), list)))]
  }

  env(field: Field, what: string): Record<string, string> {
    const map = field.value
    if (!isMap(map)) return fail(at(field), `${what} must be a map of names to values`)
    const out = new Map<string, string>()
    for (const pair of map.items) {
      const key = this.key(pair, map)
      if (!ENV_NAME.test(key.name)) fail(key.node, `${what}: '${key.name}' is not a variable name (letters, digits and '_', not starting with a digit)`)
      if (key.name.startsWith("GROVE_")) fail(key.node, `${what}: '${key.name}' is reserved (GROVE_ variables are set by the runner)`)
      if (out.has(key.name)) fail(key.node, `${what}: duplicate variable '${key.name}'`)
      const value = this.resolve(pair.value)
      const scalar = isScalar(value) ? value.value : undefined
      if (typeof scalar !== "string" && typeof scalar !== "number" && typeof scalar !== "boolean") {
        return fail(value ?? key.node, `${what}: the value of '${key.name}' must be a string, a number or true/false, not ${describe(value)}`)
      }
      out.set(key.name, String(scalar))
    }
    // fromEntries defines each name as its own property, `__proto__` included.
    return Object.fromEntries(out)
  }

  job(id: string, field: Field, ids: ReadonlySet<string>, workflowNetwork: boolean): WorkflowJob {
    const what = `job '${id}'`
    const map = field.value
    if (!isMap(map)) return fail(at(field), `${what} must be a map with 'steps'`)
    const fields = this.fields(map, what, JOB_KEYS)
    const name = fields.get("name")
    const needs = fields.get("needs")
    const env = fields.get("env")
    const timeout = fields.get("timeout-minutes")
    const cache = fields.get("cache")
    const network = fields.get("network")
    const steps = fields.get("steps")
    if (steps === undefined) return fail(field.key, `${what} needs 'steps'`)
    return {
      id,
      name: name === undefined ? id : text(name, `${what}: 'name'`, MAX_NAME),
      needs: needs === undefined ? [] : this.needs(needs, id, ids),
      env: env === undefined ? {} : this.env(env, `the env of ${what}`),
      timeoutMinutes: timeout === undefined ? undefined : timeoutMinutes(timeout, what),
      cache: cache === undefined ? undefined : this.cache(cache, what),
      network: network === undefined ? workflowNetwork : flag(network, `${what}: 'network'`),
      steps: this.steps(steps, what)
    }
  }

  needs(field: Field, id: string, ids: ReadonlySet<string>): ReadonlyArray<string> {
    const list = field.value
    const items = isSeq(list) ? list.items.map((item) => ({ node: this.resolve(item), where: list })) : [{ node: list, where: field.key }]
    const needs = items.map(({ node, where }) => {
      const need = isScalar(node) && typeof node.value === "string" ? node.value : fail(node ?? where, `job '${id}': 'needs' takes a job id or a list of them, not ${describe(node)}`)
      if (need === id) fail(node, `job '${id}' needs itself`)
      if (!ids.has(need)) fail(node, `job '${id}' needs '${need}', which is not a job in this file`)
      return need
    })
    return [...new Set(needs)]
  }

  cache(field: Field, what: string): WorkflowCache {
    const map = field.value
    if (!isMap(map)) return fail(at(field), `${what}: 'cache' must be a map with 'key' and 'paths'`)
    const fields = this.fields(map, `the cache of ${what}`, CACHE_KEYS)
    const key = fields.get("key")
    const paths = fields.get("paths")
    if (key === undefined || paths === undefined) return fail(map, `${what}: 'cache' needs both 'key' and 'paths'`)
    const keyText = text(key, `${what}: the cache key`, MAX_NAME)
    if (CONTROL.test(keyText)) fail(at(key), `${what}: the cache key must not contain control characters`)
    const list = paths.value
    if (!isSeq(list) || list.items.length === 0) return fail(at(paths), `${what}: cache 'paths' must be a list of at least one path`)
    return {
      key: keyText,
      paths: list.items.map((item) => {
        const node = this.resolve(item)
        const path = isScalar(node) ? node.value : undefined
        if (typeof path !== "string" || path.length === 0 || path.startsWith("/") || path.split("/").includes("..") || CONTROL.test(path)) {
          return fail(node ?? list, `${what}: cache paths must be relative paths inside the workspace (no leading '/', no '..'), not ${describe(node)}`)
        }
        return path
      })
    }
  }

  steps(field: Field, what: string): ReadonlyArray<WorkflowStep> {
    const list = field.value
    if (!isSeq(list) || list.items.length === 0) return fail(at(field), `${what}: 'steps' must be a list of at least one step`)
    if (list.items.length > MAX_STEPS) fail(list, `${what} may have at most ${MAX_STEPS} steps`)
    return list.items.map((item, index) => this.step(this.resolve(item) ?? list, `step ${index + 1} of ${what}`))
  }

  step(map: Node, what: string): WorkflowStep {
    if (!isMap(map)) return fail(map, `${what} must be a map with 'run'`)
    const fields = this.fields(map, what, STEP_KEYS)
    const name = fields.get("name")
    const runField = fields.get("run")
    const env = fields.get("env")
    const timeout = fields.get("timeout-minutes")
    const continueOnError = fields.get("continue-on-error")
    if (runField === undefined) return fail(map, `${what} needs 'run'`)
    const run = text(runField, `${what}: 'run'`, Infinity)
    if (utf8Bytes(run) > MAX_RUN_BYTES) fail(at(runField), `${what}: 'run' must be at most ${MAX_RUN_BYTES / 1024} KiB`)
    return {
      name: name === undefined ? defaultStepName(run) : text(name, `${what}: 'name'`, MAX_NAME),
      run,
      env: env === undefined ? {} : this.env(env, `the env of ${what}`),
      timeoutMinutes: timeout === undefined ? undefined : timeoutMinutes(timeout, what),
      continueOnError: continueOnError === undefined ? false : flag(continueOnError, `${what}: 'continue-on-error'`)
    }
  }
}

/** Each alias's target in one pass: the last node anchored with its name before it, as YAML defines. */
const aliasTargets = (doc: Document.Parsed): Map<Alias, Node> => {
  const anchors = new Map<string, Node>()
  const targets = new Map<Alias, Node>()
  visit(doc, {
    Alias: (_key, alias) => {
      const target = anchors.get(alias.source)
      if (target !== undefined) targets.set(alias, target)
    },
    Value: (_key, node) => {
      if (node.anchor !== undefined) anchors.set(node.anchor, node)
    }
  })
  return targets
}

const text = (field: Field, what: string, max: number): string => {
  const value = isScalar(field.value) ? field.value.value : undefined
  if (typeof value !== "string" || value.length === 0) return fail(at(field), `${what} must be a non-empty string`)
  if (value.length > max) fail(at(field), `${what} must be at most ${max} characters`)
  return value
}

const timeoutMinutes = (field: Field, what: string): number => {
  const value = isScalar(field.value) ? field.value.value : undefined
  if (typeof value !== "number" || !Number.isFinite(value) || value <= 0 || value > MAX_TIMEOUT_MINUTES) {
    return fail(at(field), `${what}: 'timeout-minutes' must be a number of minutes above 0 and at most ${MAX_TIMEOUT_MINUTES}`)
  }
  return value
}

const flag = (field: Field, what: string): boolean => {
  const value = isScalar(field.value) ? field.value.value : undefined
  return typeof value === "boolean" ? value : fail(at(field), `${what} must be true or false`)
}

/** The first non-blank line of the script, as a person would title it. */
const defaultStepName = (run: string): string => {
  const line = run.split("\n").find((candidate) => candidate.trim().length > 0) ?? run
  // By code points, so that the cut never splits a surrogate pair.
  return Array.from(line.trim()).slice(0, DEFAULT_STEP_NAME).join("")
}

/** A value as its author would recognise it in an error message. */
const describe = (node: Node | null): string => {
  if (isMap(node)) return "a map"
  if (isSeq(node)) return "a list"
  const value = isScalar(node) ? node.value : null
  return value === null || value === undefined ? "nothing" : typeof value === "string" ? JSON.stringify(value) : String(value)
}

const encoder = new TextEncoder()
/** The limits are on UTF-8 bytes, as the file is stored. */
const utf8Bytes = (value: string): number => encoder.encode(value).length

/** Jobs after everything they need, ties in file order. */
const order = (jobs: ReadonlyArray<ReadJob>): Array<WorkflowJob> => {
  const done = new Set<string>()
  const out: Array<WorkflowJob> = []
  while (out.length < jobs.length) {
    const next = jobs.find(({ job }) => !done.has(job.id) && job.needs.every((need) => done.has(need)))
    if (next === undefined) return failCycle(jobs.filter(({ job }) => !done.has(job.id)))
    done.add(next.job.id)
    out.push(next.job)
  }
  return out
}

/** Names only the jobs on a cycle, not the ones merely waiting behind it. */
const failCycle = (stuck: ReadonlyArray<ReadJob>): never => {
  const byId = new Map(stuck.map((entry) => [entry.job.id, entry]))
  // Every stuck job needs a stuck job, so following those needs must come round to a job already passed.
  const walk: Array<ReadJob> = []
  let entry = stuck[0]
  while (entry !== undefined && !walk.includes(entry)) {
    walk.push(entry)
    const need = entry.job.needs.find((id) => byId.has(id))
    entry = need === undefined ? undefined : byId.get(need)
  }
  const loop = walk.slice(entry === undefined ? 0 : walk.indexOf(entry))
  // Started from its first job in the file, so that the message does not depend on where the walk came in.
  const first = stuck.find((candidate) => loop.includes(candidate))
  const start = first === undefined ? 0 : loop.indexOf(first)
  const cycle = [...loop.slice(start), ...loop.slice(0, start)]
  const names = [...cycle, ...cycle.slice(0, 1)].map(({ job }) => `'${job.id}'`).join(" -> ")
  return fail(cycle[0]?.key ?? null, `jobs need each other in a cycle: ${names}`)
}
