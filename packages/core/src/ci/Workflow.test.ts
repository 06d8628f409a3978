import { describe, expect, it } from "@effect/vitest"
import { isWorkflowPath, parseWorkflow, workflowName } from "./Workflow.ts"

const PATH = ".oak/workflows/ci.yml"
const ok = (text: string) => {
  const parsed = parseWorkflow(PATH, text)
  if (parsed._tag !== "Valid") throw new Error(parsed.error)
  return parsed.workflow
}

/** [what, file text, the exact error]. */
const INVALID: ReadonlyArray<readonly [string, string, string]> = [
  ["unknown top-level key", "name: x\njobs:\n  a:\n    steps: [{run: x}]\n", "1: unknown key 'name' in the workflow (allowed: on, env, jobs)"],
  ["unknown job key", "jobs:\n  build:\n    stepz:\n      - run: x\n", "3: unknown key 'stepz' in job 'build' (allowed: name, needs, env, timeout-minutes, cache, steps)"],
  ["unknown step key", "jobs:\n  a:\n    steps:\n      - run: x\n        shell: zsh\n", "5: unknown key 'shell' in step 1 of job 'a' (allowed: name, run, env, timeout-minutes, continue-on-error)"],
  ["missing run", "jobs:\n  a:\n    steps:\n      - name: hi\n", "4: step 1 of job 'a' needs 'run'"],
  ["empty run", "jobs:\n  a:\n    steps:\n      - run: ''\n", "4: step 1 of job 'a': 'run' must be a non-empty string"],
  ["no steps", "jobs:\n  a:\n    steps: []\n", "3: job 'a': 'steps' must be a list of at least one step"],
  ["no jobs", "on: push\n", "1: a workflow needs 'jobs'"],
  ["unknown need", "jobs:\n  test:\n    needs: [biuld]\n    steps:\n      - run: x\n", "2: job 'test' needs 'biuld', which is not a job in this file"],
  ["self need", "jobs:\n  a:\n    needs: a\n    steps: [{run: x}]\n", "2: job 'a' needs itself"],
  ["cycle", "jobs:\n  a:\n    needs: b\n    steps: [{run: x}]\n  b:\n    needs: a\n    steps: [{run: x}]\n", "2: jobs 'a', 'b' need each other in a cycle"],
  ["zero timeout", "jobs:\n  a:\n    timeout-minutes: 0\n    steps: [{run: x}]\n", "3: job 'a': 'timeout-minutes' must be a number of minutes above 0 and at most 1440"],
  ["negative timeout", "jobs:\n  a:\n    steps:\n      - run: x\n        timeout-minutes: -1\n", "5: step 1 of job 'a': 'timeout-minutes' must be a number of minutes above 0 and at most 1440"],
  ["string timeout", "jobs:\n  a:\n    timeout-minutes: ten\n    steps: [{run: x}]\n", "3: job 'a': 'timeout-minutes' must be a number of minutes above 0 and at most 1440"],
  ["huge timeout", "jobs:\n  a:\n    timeout-minutes: 1441\n    steps: [{run: x}]\n", "3: job 'a': 'timeout-minutes' must be a number of minutes above 0 and at most 1440"],
  ["cache without key", "jobs:\n  a:\n    cache:\n      paths: [x]\n    steps: [{run: x}]\n", "4: job 'a': 'cache' needs both 'key' and 'paths'"],
  ["absolute cache path", "jobs:\n  a:\n    cache: {key: k, paths: [/etc]}\n    steps: [{run: x}]\n", "3: job 'a': cache paths must be relative paths inside the workspace (no leading '/', no '..')"],
  ["climbing cache path", "jobs:\n  a:\n    cache: {key: k, paths: [a/../../x]}\n    steps: [{run: x}]\n", "3: job 'a': cache paths must be relative paths inside the workspace (no leading '/', no '..')"],
  ["bad env name", "env:\n  1X: y\njobs:\n  a:\n    steps: [{run: x}]\n", "2: the workflow's env: '1X' is not a variable name (letters, digits and '_', not starting with a digit)"],
  ["reserved env name", "jobs:\n  a:\n    env:\n      GROVE_RUN_ID: 1\n    steps: [{run: x}]\n", "4: the env of job 'a': 'GROVE_RUN_ID' is reserved (GROVE_ variables are set by the runner)"],
  ["null env value", "env:\n  A:\njobs:\n  a:\n    steps: [{run: x}]\n", "2: the workflow's env: the value of 'A' must be a string, a number or true/false"],
  ["syntax error", "jobs:\n  a: [\n", "3: invalid YAML: Flow sequence in block collection must be sufficiently indented and end with a ]"],
  ["duplicate key", "jobs:\n  a:\n    steps: [{run: x}]\n  a:\n    steps: [{run: y}]\n", "4: invalid YAML: Map keys must be unique"],
  ["not a map", "- a\n", "1: a workflow must be a map with 'jobs' (and optionally 'on' and 'env')"],
  ["two documents", "jobs:\n  a:\n    steps: [{run: x}]\n---\nx: 1\n", "4: a workflow file holds one YAML document, not several"],
  ["unknown event", "on: [push, pull_request]\njobs:\n  a:\n    steps: [{run: x}]\n", "1: 'on' takes push, merge, manual, branch.created, not \"pull_request\""],
  ["no events", "on: []\njobs:\n  a:\n    steps: [{run: x}]\n", "1: 'on' must name at least one event"],
  ["empty file", "", "1: the file is empty: a workflow needs jobs"],
  ["bad job id", "jobs:\n  'a b':\n    steps: [{run: x}]\n", "2: job id 'a b' must be 1-64 letters, digits, '_' or '-'"],
  ["continue-on-error not boolean", "jobs:\n  a:\n    steps:\n      - run: x\n        continue-on-error: yes please\n", "5: step 1 of job 'a': 'continue-on-error' must be true or false"]
]

describe("parseWorkflow", () => {
  it.each(INVALID)("refuses %s, naming the file and the line", (_what, text, error) => {
    expect(parseWorkflow(PATH, text)).toEqual({ _tag: "Invalid", name: "ci", path: PATH, error: `${PATH}:${error}` })
  })

  it("refuses a file over 256 KiB and an alias bomb without expanding it", () => {
    const big = parseWorkflow(PATH, `jobs:\n  a:\n    steps: [{run: x}]\n#${"x".repeat(256 * 1024)}`)
    expect(big).toMatchObject({ _tag: "Invalid", error: `${PATH}:1: the file is larger than 256 KiB` })
    const bomb = ["jobs:", "  a:", "    env: &e {A: 1}", "    steps:", ...Array.from({ length: 150 }, () => "      - {run: x, env: *e}")].join("\n")
    expect(parseWorkflow(PATH, bomb)).toMatchObject({ _tag: "Invalid", error: `${PATH}:105: too many aliases` })
  })

  it("reads a full workflow with its defaults", () => {
    const workflow = ok([
      "on: [push, push, merge]",
      "env: {A: 1, B: true, C: text}",
      "jobs:",
      "  test:",
      "    needs: build",
      "    steps:",
      "      - run: |",
      "          npm test",
      "          echo done",
      "        continue-on-error: true",
      "        timeout-minutes: 0.5",
      "  build:",
      "    name: Build it",
      "    timeout-minutes: 10",
      "    cache: {key: deps-v1, paths: [node_modules, .cache/x]}",
      "    env: {D: '4'}",
      "    steps:",
      "      - name: compile",
      "        run: make",
      "        env: {E: 5}"
    ].join("\n"))
    expect(workflow).toEqual({
      name: "ci",
      path: PATH,
      on: ["push", "merge"],
      env: { A: "1", B: "true", C: "text" },
      jobs: [
        {
          id: "build",
          name: "Build it",
          needs: [],
          env: { D: "4" },
          timeoutMinutes: 10,
          cache: { key: "deps-v1", paths: ["node_modules", ".cache/x"] },
          steps: [{ name: "compile", run: "make", env: { E: "5" }, timeoutMinutes: undefined, continueOnError: false }]
        },
        {
          id: "test",
          name: "test",
          needs: ["build"],
          env: {},
          timeoutMinutes: undefined,
          cache: undefined,
          steps: [{ name: "npm test", run: "npm test\necho done\n", env: {}, timeoutMinutes: 0.5, continueOnError: true }]
        }
      ]
    })
  })

  it("runs on every event without `on`, takes one event as a string, and orders jobs by needs then file order", () => {
    expect(ok("jobs:\n  a:\n    steps: [{run: x}]\n").on).toEqual(["push", "branch.created", "merge", "manual"])
    expect(ok("on: manual\njobs:\n  a:\n    steps: [{run: x}]\n").on).toEqual(["manual"])
    const jobs = ok([
      "jobs:",
      "  deploy: {needs: [test, lint], steps: [{run: x}]}",
      "  test: {needs: build, steps: [{run: x}]}",
      "  lint: {steps: [{run: x}]}",
      "  build: {steps: [{run: x}]}"
    ].join("\n")).jobs.map((job) => job.id)
    expect(jobs).toEqual(["lint", "build", "test", "deploy"])
  })
})

describe("workflow paths", () => {
  it.each([
    [".oak/workflows/ci.yml", true],
    [".oak/workflows/ci.yaml", true],
    [".oak/workflows/a/b.yml", false],
    [".oak/workflows/.yml", false],
    [".oak/workflows/x.txt", false],
    ["oak/workflows/x.yml", false]
  ] as const)("%s is a workflow file: %s", (path, expected) => {
    expect(isWorkflowPath(path)).toBe(expected)
  })

  it("names a workflow after its file's stem", () => {
    expect(workflowName(".oak/workflows/release.yaml")).toBe("release")
  })
})
