/**
 * The workflow file (`.oak/workflows/<name>.yml` or `.yaml`): parsed with the `yaml` library and
 * validated key by key, so an invalid file becomes a run that fails at once with an error naming
 * the file and the line (`path:line: message`) instead of being skipped. Pure: no I/O.
 */
import { type Document, isAlias, isMap, isScalar, isSeq, LineCounter, type Node, parseAllDocuments, type YAMLMap } from "yaml"

export type WorkflowEvent = "push" | "merge" | "manual" | "branch.created"
export const WORKFLOW_EVENTS: ReadonlyArray<WorkflowEvent> = ["push", "merge", "manual", "branch.created"]

export interface WorkflowCache {
  readonly key: string
  readonly paths: ReadonlyArray<string>
}
export interface WorkflowStep {
  readonly name: string
  readonly run: string
  readonly env: Readonly<Record<string, string>>
  readonly timeoutMinutes: number | undefined
  readonly continueOnError: boolean
}
export interface WorkflowJob {
  readonly id: string
  readonly name: string
  readonly needs: ReadonlyArray<string>
  readonly env: Readonly<Record<string, string>>
  readonly timeoutMinutes: number | undefined
  readonly cache: WorkflowCache | undefined
  readonly steps: ReadonlyArray<WorkflowStep>
}
export interface Workflow {
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

export const MAX_WORKFLOW_TEXT = 256 * 1024
export const MAX_JOBS = 100
export const MAX_STEPS = 200
export const MAX_RUN = 64 * 1024
const MAX_TIMEOUT_MINUTES = 1440
const DEFAULT_ON: ReadonlyArray<WorkflowEvent> = ["push", "branch.created", "merge", "manual"]

const WORKFLOW_PATH = /^\.oak\/workflows\/([^/]+)\.(?:yml|yaml)$/
const JOB_ID = /^[A-Za-z0-9_-]{1,64}$/
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/
// oxlint-disable-next-line no-control-regex -- finding control characters is the point
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/

export const isWorkflowPath = (path: string): boolean => WORKFLOW_PATH.test(path)
export const workflowName = (path: string): string => WORKFLOW_PATH.exec(path)?.[1] ?? path.slice(path.lastIndexOf("/") + 1).replace(/\.(?:yml|yaml)$/, "")

/** A validation failure at a node (its line is looked up when reported). */
class Invalid {
  readonly node: Node | null | undefined
  readonly message: string
  constructor(node: Node | null | undefined, message: string) {
    this.node = node
    this.message = message
  }
}

const fail = (node: Node | null | undefined, message: string): never => {
  throw new Invalid(node, message)
}

export const parseWorkflow = (path: string, text: string): ParsedWorkflow => {
  const name = workflowName(path)
  const invalid = (line: number, message: string): ParsedWorkflow => ({ _tag: "Invalid", name, path, error: `${path}:${line}: ${message}` })
  if (text.length > MAX_WORKFLOW_TEXT) return invalid(1, `the file is larger than ${MAX_WORKFLOW_TEXT / 1024} KiB`)
  const lines = new LineCounter()
  const docs = parseAllDocuments(text, { lineCounter: lines, uniqueKeys: true, prettyErrors: false, strict: true })
  const lineOf = (offset: number | undefined) => offset === undefined ? 1 : lines.linePos(offset).line
  if (!Array.isArray(docs)) return invalid(1, "the file is empty: a workflow needs jobs")
  if (docs.length === 0) return invalid(1, "the file is empty: a workflow needs jobs")
  const doc = docs[0]!
  const problem = doc.errors[0]
  if (problem !== undefined) return invalid(lineOf(problem.pos[0]), `invalid YAML: ${problem.message.split("\n")[0]}`)
  if (docs.length > 1) return invalid(lineOf(docs[1]!.range[0]), "a workflow file holds one YAML document, not several")
  try {
    return { _tag: "Valid", workflow: readWorkflow(doc, name, path) }
  } catch (error) {
    if (error instanceof Invalid) return invalid(lineOf(error.node?.range?.[0]), error.message)
    // An alias bomb or another limit of the YAML library.
    return invalid(1, `invalid YAML: ${error instanceof Error ? error.message.split("\n")[0] : String(error)}`)
  }
}

type ParsedDoc = Document.Parsed

const resolver = (doc: ParsedDoc) => {
  let aliases = 0
  return (node: unknown): Node | null => {
    let current = node as Node | null | undefined
    while (isAlias(current)) {
      if (++aliases > 100) fail(current, "too many aliases")
      current = current.resolve(doc) as Node | undefined
    }
    return current ?? null
  }
}

const readWorkflow = (doc: ParsedDoc, name: string, path: string): Workflow => {
  const resolve = resolver(doc)
  const root = resolve(doc.contents)
  if (!isMap(root)) return fail(root, "a workflow must be a map with 'jobs' (and optionally 'on' and 'env')")
  const top = entries(root, resolve, "the workflow", ["on", "env", "jobs"])
  const on = top.has("on") ? readOn(top.get("on")!, resolve) : DEFAULT_ON
  const env = top.has("env") ? readEnv(top.get("env")!, resolve, "the workflow's env") : {}
  const jobsNode = top.get("jobs")
  if (jobsNode === undefined) return fail(root, "a workflow needs 'jobs'")
  if (!isMap(jobsNode) || jobsNode.items.length === 0) return fail(jobsNode.node, "'jobs' must be a map of at least one job")
  const jobs: Array<WorkflowJob & { readonly node: Node }> = []
  for (const pair of jobsNode.items) {
    const key = resolve(pair.key)
    const id = isScalar(key) ? String(key.value) : fail(key, "a job's id must be a name")
    if (!JOB_ID.test(id)) fail(key, `job id '${id}' must be 1-64 letters, digits, '_' or '-'`)
    if (jobs.length >= MAX_JOBS) fail(key, `a workflow may have at most ${MAX_JOBS} jobs`)
    jobs.push({ ...readJob(id, resolve(pair.value), resolve, key!), node: key! })
  }
  const ids = new Set(jobs.map((job) => job.id))
  for (const job of jobs) {
    for (const need of job.needs) {
      if (need === job.id) fail(job.node, `job '${job.id}' needs itself`)
      if (!ids.has(need)) fail(job.node, `job '${job.id}' needs '${need}', which is not a job in this file`)
    }
  }
  return { name, path, on, env, jobs: order(jobs).map(withoutNode) }
}

const withoutNode = (job: WorkflowJob & { readonly node: Node }): WorkflowJob => ({
  id: job.id,
  name: job.name,
  needs: job.needs,
  env: job.env,
  timeoutMinutes: job.timeoutMinutes,
  cache: job.cache,
  steps: job.steps
})

/** Jobs after everything they need, ties in file order; a cycle names its jobs. */
const order = <J extends { readonly id: string; readonly needs: ReadonlyArray<string>; readonly node: Node }>(jobs: ReadonlyArray<J>): Array<J> => {
  const done = new Set<string>()
  const out: Array<J> = []
  while (out.length < jobs.length) {
    const next = jobs.find((job) => !done.has(job.id) && job.needs.every((need) => done.has(need)))
    if (next === undefined) {
      const stuck = jobs.filter((job) => !done.has(job.id))
      return fail(stuck[0]!.node, `jobs ${stuck.map((job) => `'${job.id}'`).join(", ")} need each other in a cycle`)
    }
    done.add(next.id)
    out.push(next)
  }
  return out
}

interface Field {
  readonly node: Node | null
  /** The key's node, for errors about a missing or misplaced value. */
  readonly keyNode: Node
}

/** The map's entries by key, refusing keys outside `allowed`. */
const entries = (map: YAMLMap, resolve: (node: unknown) => Node | null, what: string, allowed: ReadonlyArray<string>): Map<string, Field & Node> => {
  const out = new Map<string, Field & Node>()
  for (const pair of map.items) {
    const key = resolve(pair.key)
    const name = isScalar(key) ? String(key.value) : fail(key, `keys of ${what} must be names`)
    if (!allowed.includes(name)) fail(key, `unknown key '${name}' in ${what} (allowed: ${allowed.join(", ")})`)
    const value = resolve(pair.value)
    // A missing value (`key:`) is reported at its key.
    out.set(name, Object.assign(value ?? key!, { node: value, keyNode: key! }))
  }
  return out
}

const readOn = (field: Field, resolve: (node: unknown) => Node | null): ReadonlyArray<WorkflowEvent> => {
  const node = field.node
  const one = (item: Node | null): WorkflowEvent => {
    const value = isScalar(item) ? item.value : undefined
    if (typeof value !== "string" || !WORKFLOW_EVENTS.includes(value as WorkflowEvent)) {
      return fail(item ?? field.keyNode, `'on' takes ${WORKFLOW_EVENTS.join(", ")}, not ${JSON.stringify(value ?? null)}`)
    }
    return value as WorkflowEvent
  }
  if (isSeq(node)) {
    if (node.items.length === 0) fail(node, "'on' must name at least one event")
    return [...new Set(node.items.map((item) => one(resolve(item))))]
  }
  return [one(node)]
}

const scalarText = (node: Node | null, fallback: Node, what: string): string => {
  if (!isScalar(node) || node.value === null || typeof node.value === "object") return fail(node ?? fallback, `${what} must be a string, a number or true/false`)
  return String(node.value)
}

const readEnv = (field: Field, resolve: (node: unknown) => Node | null, what: string): Record<string, string> => {
  if (!isMap(field.node)) return fail(field.node ?? field.keyNode, `${what} must be a map of names to values`)
  const out: Record<string, string> = {}
  for (const pair of field.node.items) {
    const key = resolve(pair.key)
    const name = isScalar(key) ? String(key.value) : fail(key, `${what}: names must be strings`)
    if (!ENV_NAME.test(name)) fail(key, `${what}: '${name}' is not a variable name (letters, digits and '_', not starting with a digit)`)
    if (name.toUpperCase().startsWith("GROVE_")) fail(key, `${what}: '${name}' is reserved (GROVE_ variables are set by the runner)`)
    out[name] = scalarText(resolve(pair.value), key!, `${what}: the value of '${name}'`)
  }
  return out
}

const readTimeout = (field: Field, what: string): number => {
  const value = isScalar(field.node) ? field.node.value : undefined
  if (typeof value !== "number" || !Number.isFinite(value) || value <= 0 || value > MAX_TIMEOUT_MINUTES) {
    return fail(field.node ?? field.keyNode, `${what}: 'timeout-minutes' must be a number of minutes above 0 and at most ${MAX_TIMEOUT_MINUTES}`)
  }
  return value
}

const readString = (field: Field, what: string, max: number): string => {
  const value = isScalar(field.node) ? field.node.value : undefined
  if (typeof value !== "string" || value.length === 0) return fail(field.node ?? field.keyNode, `${what} must be a non-empty string`)
  if (value.length > max) fail(field.node, `${what} must be at most ${max} characters`)
  return value
}

const readJob = (id: string, node: Node | null, resolve: (node: unknown) => Node | null, keyNode: Node): WorkflowJob => {
  const what = `job '${id}'`
  if (!isMap(node)) return fail(node ?? keyNode, `${what} must be a map with 'steps'`)
  const fields = entries(node, resolve, what, ["name", "needs", "env", "timeout-minutes", "cache", "steps"])
  const stepsField = fields.get("steps")
  if (stepsField === undefined) return fail(keyNode, `${what} needs 'steps'`)
  if (!isSeq(stepsField.node) || stepsField.node.items.length === 0) return fail(stepsField.node ?? stepsField.keyNode, `${what}: 'steps' must be a list of at least one step`)
  if (stepsField.node.items.length > MAX_STEPS) fail(stepsField.node, `${what} may have at most ${MAX_STEPS} steps`)
  const needsField = fields.get("needs")
  let needs: ReadonlyArray<string> = []
  if (needsField !== undefined) {
    const items = isSeq(needsField.node) ? needsField.node.items.map(resolve) : [needsField.node]
    needs = [...new Set(items.map((item) => {
      const value = isScalar(item) ? item.value : undefined
      return typeof value === "string" && value.length > 0 ? value : fail(item ?? needsField.keyNode, `${what}: 'needs' names jobs of this file`)
    }))]
  }
  const cacheField = fields.get("cache")
  let cache: WorkflowCache | undefined
  if (cacheField !== undefined) {
    if (!isMap(cacheField.node)) return fail(cacheField.node ?? cacheField.keyNode, `${what}: 'cache' must be a map with 'key' and 'paths'`)
    const parts = entries(cacheField.node, resolve, `the cache of ${what}`, ["key", "paths"])
    const key = parts.get("key")
    const paths = parts.get("paths")
    if (key === undefined || paths === undefined) return fail(cacheField.node, `${what}: 'cache' needs both 'key' and 'paths'`)
    const keyText = readString(key, `${what}: the cache key`, 200)
    if (CONTROL.test(keyText)) fail(key.node, `${what}: the cache key must not contain control characters`)
    if (!isSeq(paths.node) || paths.node.items.length === 0) return fail(paths.node ?? paths.keyNode, `${what}: cache 'paths' must be a list of at least one path`)
    cache = {
      key: keyText,
      paths: paths.node.items.map((item) => {
        const resolved = resolve(item)
        const value = isScalar(resolved) ? resolved.value : undefined
        if (typeof value !== "string" || value.length === 0 || value.startsWith("/") || value.split("/").includes("..") || CONTROL.test(value)) {
          return fail(resolved ?? paths.node, `${what}: cache paths must be relative paths inside the workspace (no leading '/', no '..')`)
        }
        return value
      })
    }
  }
  const steps = stepsField.node.items.map((item, index) => readStep(resolve(item), resolve, `step ${index + 1} of ${what}`, stepsField.node!))
  const nameField = fields.get("name")
  return {
    id,
    name: nameField === undefined ? id : readString(nameField, `${what}: 'name'`, 200),
    needs,
    env: fields.has("env") ? readEnv(fields.get("env")!, resolve, `the env of ${what}`) : {},
    timeoutMinutes: fields.has("timeout-minutes") ? readTimeout(fields.get("timeout-minutes")!, what) : undefined,
    cache,
    steps
  }
}

const readStep = (node: Node | null, resolve: (node: unknown) => Node | null, what: string, list: Node): WorkflowStep => {
  if (!isMap(node)) return fail(node ?? list, `${what} must be a map with 'run'`)
  const fields = entries(node, resolve, what, ["name", "run", "env", "timeout-minutes", "continue-on-error"])
  const runField = fields.get("run")
  if (runField === undefined) return fail(node, `${what} needs 'run'`)
  const run = readString(runField, `${what}: 'run'`, MAX_RUN)
  const nameField = fields.get("name")
  const continueField = fields.get("continue-on-error")
  const continueValue = isScalar(continueField?.node) ? continueField.node.value : undefined
  if (continueField !== undefined && typeof continueValue !== "boolean") fail(continueField.node ?? continueField.keyNode, `${what}: 'continue-on-error' must be true or false`)
  return {
    name: nameField === undefined ? (run.split("\n").find((line) => line.trim().length > 0) ?? run).trim().slice(0, 80) : readString(nameField, `${what}: 'name'`, 200),
    run,
    env: fields.has("env") ? readEnv(fields.get("env")!, resolve, `the env of ${what}`) : {},
    timeoutMinutes: fields.has("timeout-minutes") ? readTimeout(fields.get("timeout-minutes")!, what) : undefined,
    continueOnError: continueValue === true
  }
}
