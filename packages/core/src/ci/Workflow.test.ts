import { describe, expect, it } from "@effect/vitest"
import { isWorkflowPath, parseWorkflow, type Workflow, type WorkflowJob, type WorkflowStep, workflowName } from "./Workflow.ts"

const PATH = ".oak/workflows/ci.yml"
/** One line of the file per argument, so that line numbers in the tables can be counted. */
const yaml = (...lines: ReadonlyArray<string>): string => `${lines.join("\n")}\n`
const step = (run: string, rest: Partial<WorkflowStep> = {}): WorkflowStep => ({ name: run, run, env: {}, timeoutMinutes: undefined, continueOnError: false, ...rest })
const job = (id: string, steps: ReadonlyArray<WorkflowStep>, rest: Partial<WorkflowJob> = {}): WorkflowJob => ({
  id,
  name: id,
  needs: [],
  env: {},
  timeoutMinutes: undefined,
  cache: undefined,
  network: true,
  steps,
  ...rest
})
const workflow = (jobs: ReadonlyArray<WorkflowJob>, rest: Partial<Workflow> = {}): Workflow => ({
  name: "ci",
  path: PATH,
  on: ["push", "branch.created", "merge", "manual"],
  env: {},
  jobs,
  ...rest
})
const A_STEP = "    steps: [{run: x}]"

/** [what, file text, the workflow read]. */
const VALID: ReadonlyArray<readonly [string, string, Workflow]> = [
  ["a minimal file, with every default", yaml("jobs:", "  build:", "    steps:", "      - run: make"), workflow([job("build", [step("make")])])],
  [
    "a step named after the first non-blank line of its script, cut to 80 characters",
    yaml("jobs:", "  a:", "    steps:", "      - run: |", "", `          ${"x".repeat(90)}`, "          echo done"),
    workflow([job("a", [step(`\n${"x".repeat(90)}\necho done\n`, { name: "x".repeat(80) })])])
  ],
  [
    "env values of every scalar kind, as strings",
    yaml("env: {A: 1, B: true, C: text, D: 0.5, E: yes, F: '007'}", "jobs:", "  a:", "    env: {G: false}", "    steps:", "      - run: x", "        env: {H: 12}"),
    workflow([job("a", [step("x", { env: { H: "12" } })], { env: { G: "false" } })], { env: { A: "1", B: "true", C: "text", D: "0.5", E: "yes", F: "007" } })
  ],
  ["one event as a string", yaml("on: manual", "jobs:", "  a:", A_STEP), workflow([job("a", [step("x")])], { on: ["manual"] })],
  ["a list of events, duplicates collapsed", yaml("on: [merge, push, merge, branch.created]", "jobs:", "  a:", A_STEP), workflow([job("a", [step("x")])], { on: ["merge", "push", "branch.created"] })],
  [
    "jobs in dependency order, ties in file order, one need as a string",
    yaml(
      "jobs:",
      "  deploy: {needs: [test, lint, test], steps: [{run: x}]}",
      "  test: {needs: build, steps: [{run: x}]}",
      "  lint: {steps: [{run: x}]}",
      "  build: {steps: [{run: x}]}"
    ),
    workflow([
      job("lint", [step("x")]),
      job("build", [step("x")]),
      job("test", [step("x")], { needs: ["build"] }),
      job("deploy", [step("x")], { needs: ["test", "lint"] })
    ])
  ],
  [
    "every job and step key",
    yaml(
      "jobs:",
      "  build-1_x:",
      "    name: Build it",
      "    timeout-minutes: 0.05",
      "    cache: {key: deps-v1, paths: [node_modules, .cache/x, ./y]}",
      "    steps:",
      "      - name: compile",
      "        run: make",
      "        timeout-minutes: 1440",
      "        continue-on-error: true",
      "      - run: make test",
      "        continue-on-error: false"
    ),
    workflow([
      job("build-1_x", [step("make", { name: "compile", timeoutMinutes: 1440, continueOnError: true }), step("make test")], {
        name: "Build it",
        timeoutMinutes: 0.05,
        cache: { key: "deps-v1", paths: ["node_modules", ".cache/x", "./y"] }
      })
    ])
  ],
  ["a job id that YAML would read as a number", yaml("jobs:", "  123:", A_STEP), workflow([job("123", [step("x")])])],
  [
    "anchors and aliases",
    yaml("env: &shared {A: 1}", "jobs:", "  a:", "    env: *shared", "    steps: &steps [{run: x}]", "  b:", "    steps: *steps"),
    workflow([job("a", [step("x")], { env: { A: "1" } }), job("b", [step("x")])], { env: { A: "1" } })
  ],
  [
    "network off for the workflow, on again for one job",
    yaml("network: false", "jobs:", "  offline:", A_STEP, "  online:", "    network: true", A_STEP),
    workflow([job("offline", [step("x")], { network: false }), job("online", [step("x")])])
  ],
  ["network off for one job", yaml("jobs:", "  a:", "    network: false", A_STEP, "  b:", A_STEP), workflow([job("a", [step("x")], { network: false }), job("b", [step("x")])])],
  ["an env variable named __proto__, as a plain name", yaml("env: {__proto__: 1}", "jobs:", "  a:", A_STEP), workflow([job("a", [step("x")])], { env: Object.fromEntries([["__proto__", "1"]]) })]
]

/** [what, file text, the exact error after the path]. */
const INVALID: ReadonlyArray<readonly [string, string, string]> = [
  // The file as a whole
  ["a file over 256 KiB", yaml("jobs:", "  a:", A_STEP, `# ${"x".repeat(256 * 1024)}`), "1: the file is larger than 256 KiB"],
  ["a file over 256 KiB of UTF-8 but not of characters", yaml("jobs:", "  a:", A_STEP, `# ${"é".repeat(128 * 1024)}`), "1: the file is larger than 256 KiB"],
  ["an empty file", "", "1: the file is empty: a workflow needs 'jobs'"],
  ["a syntax error", yaml("jobs:", "  a: [", "  b: 1"), "3: invalid YAML: Flow sequence in block collection must be sufficiently indented and end with a ]"],
  ["a duplicate top-level key", yaml("on: push", "jobs:", "  a:", A_STEP, "on: merge"), "5: duplicate key 'on' in the workflow"],
  ["a duplicate job id", yaml("jobs:", "  a:", A_STEP, "  a:", A_STEP), "4: duplicate job id 'a'"],
  ["a duplicate step key", yaml("jobs:", "  a:", "    steps:", "      - {run: x, run: y}"), "4: duplicate key 'run' in step 1 of job 'a'"],
  ["a duplicate env variable", yaml("env:", "  A: 1", "  A: 2", "jobs:", "  a:", A_STEP), "3: the workflow's env: duplicate variable 'A'"],
  ["a list for a document", yaml("- jobs"), "1: a workflow must be a map with 'jobs' (and optionally 'on', 'env' and 'network')"],
  ["a string for a document", yaml("jobs"), "1: a workflow must be a map with 'jobs' (and optionally 'on', 'env' and 'network')"],
  ["two documents", yaml("jobs:", "  a:", A_STEP, "---", "jobs: {}"), "4: a workflow file holds one YAML document, not several"],
  ["an alias without an anchor", yaml("jobs:", "  a:", "    steps: *steps"), "3: alias '*steps' has no anchor before it"],
  [
    // 10,000 variables read once, then 10,003 values a step (the step, its run, its env and the variables): the 26th step passes 262,144.
    "an alias bomb",
    yaml(`env: &e {${Array.from({ length: 10_000 }, (_, index) => `V${index}: 1`).join(", ")}}`, "jobs:", "  a:", "    steps:", ...Array.from({ length: 30 }, () => "      - {run: x, env: *e}")),
    "30: aliases expand the file beyond 262144 values"
  ],
  // Top level
  ["a 'name' (the name is the file's)", yaml("name: x", "jobs:", "  a:", A_STEP), "1: unknown key 'name' in the workflow (allowed: on, env, network, jobs)"],
  ["no jobs", yaml("on: push"), "1: a workflow needs 'jobs'"],
  ["an empty jobs map", yaml("jobs: {}"), "1: 'jobs' must be a map of at least one job"],
  ["a list of jobs", yaml("jobs:", "  - a"), "2: 'jobs' must be a map of at least one job"],
  ["an unknown event", yaml("on: [push, pull_request]", "jobs:", "  a:", A_STEP), "1: 'on' takes push, merge, manual, branch.created (or a list of them), not \"pull_request\""],
  ["events in a map", yaml("on:", "  push: {}", "jobs:", "  a:", A_STEP), "2: 'on' takes push, merge, manual, branch.created (or a list of them), not a map"],
  ["no event in 'on:'", yaml("on:", "jobs:", "  a:", A_STEP), "1: 'on' takes push, merge, manual, branch.created (or a list of them), not nothing"],
  ["an empty list of events", yaml("on: []", "jobs:", "  a:", A_STEP), "1: 'on' must name at least one event"],
  // env, at each level
  ["an env variable name starting with a digit", yaml("env:", "  1X: y", "jobs:", "  a:", A_STEP), "2: the workflow's env: '1X' is not a variable name (letters, digits and '_', not starting with a digit)"],
  ["an env variable name with a dash", yaml("jobs:", "  a:", "    env: {A-B: 1}", A_STEP), "3: the env of job 'a': 'A-B' is not a variable name (letters, digits and '_', not starting with a digit)"],
  [
    "a reserved env variable",
    yaml("jobs:", "  a:", "    steps:", "      - run: x", "        env:", "          GROVE_RUN_ID: 1"),
    "6: the env of step 1 of job 'a': 'GROVE_RUN_ID' is reserved (GROVE_ variables are set by the runner)"
  ],
  ["a null env value", yaml("env:", "  A:", "jobs:", "  a:", A_STEP), "2: the workflow's env: the value of 'A' must be a string, a number or true/false, not nothing"],
  ["a list for an env value", yaml("env:", "  A: [1]", "jobs:", "  a:", A_STEP), "2: the workflow's env: the value of 'A' must be a string, a number or true/false, not a list"],
  ["a list for env", yaml("env: [A]", "jobs:", "  a:", A_STEP), "1: the workflow's env must be a map of names to values"],
  // Jobs
  ["a job id with a space", yaml("jobs:", "  'a b':", A_STEP), "2: job id 'a b' must be 1-64 letters, digits, '_' or '-'"],
  ["a job id of 65 characters", yaml("jobs:", `  ${"j".repeat(65)}:`, A_STEP), `2: job id '${"j".repeat(65)}' must be 1-64 letters, digits, '_' or '-'`],
  ["101 jobs", yaml("jobs:", ...Array.from({ length: 101 }, (_, index) => `  j${index}: {steps: [{run: x}]}`)), "102: a workflow may have at most 100 jobs"],
  ["an unknown job key", yaml("jobs:", "  build:", "    runs-on: linux", "    stepz:", "      - run: x"), "3: unknown key 'runs-on' in job 'build' (allowed: name, needs, env, timeout-minutes, cache, network, steps)"],
  ["a job that is not a map", yaml("jobs:", "  a: make"), "2: job 'a' must be a map with 'steps'"],
  ["a job without steps", yaml("jobs:", "  a:", "    name: A"), "2: job 'a' needs 'steps'"],
  ["an empty list of steps", yaml("jobs:", "  a:", "    steps: []"), "3: job 'a': 'steps' must be a list of at least one step"],
  ["201 steps", yaml("jobs:", "  a:", "    steps:", ...Array.from({ length: 201 }, () => "      - run: x")), "4: job 'a' may have at most 200 steps"],
  ["an empty job name", yaml("jobs:", "  a:", "    name: ''", A_STEP), "3: job 'a': 'name' must be a non-empty string"],
  // needs
  ["a need that is not a job", yaml("on: push", "jobs:", "  test:", "    needs: [build, biuld]", A_STEP, "  build:", A_STEP), "4: job 'test' needs 'biuld', which is not a job in this file"],
  ["a job that needs itself", yaml("jobs:", "  a:", "    needs: a", A_STEP), "3: job 'a' needs itself"],
  ["a number for a need", yaml("jobs:", "  a:", "    needs: [1.5]", A_STEP), "3: job 'a': 'needs' takes a job id or a list of them, not 1.5"],
  ["two jobs that need each other", yaml("jobs:", "  a:", "    needs: b", A_STEP, "  b:", "    needs: a", A_STEP), "2: jobs need each other in a cycle: 'a' -> 'b' -> 'a'"],
  [
    "a cycle behind a job that only waits on it",
    yaml("jobs:", "  waits: {needs: [ok, c], steps: [{run: x}]}", "  ok: {steps: [{run: x}]}", "  b: {needs: c, steps: [{run: x}]}", "  c: {needs: [ok, d], steps: [{run: x}]}", "  d: {needs: b, steps: [{run: x}]}"),
    "4: jobs need each other in a cycle: 'b' -> 'c' -> 'd' -> 'b'"
  ],
  // timeout-minutes
  ["a timeout of 0", yaml("jobs:", "  a:", "    timeout-minutes: 0", A_STEP), "3: job 'a': 'timeout-minutes' must be a number of minutes above 0 and at most 1440"],
  ["a negative timeout", yaml("jobs:", "  a:", "    steps:", "      - run: x", "        timeout-minutes: -1"), "5: step 1 of job 'a': 'timeout-minutes' must be a number of minutes above 0 and at most 1440"],
  ["a timeout as a string", yaml("jobs:", "  a:", "    timeout-minutes: '10'", A_STEP), "3: job 'a': 'timeout-minutes' must be a number of minutes above 0 and at most 1440"],
  ["a timeout over a day", yaml("jobs:", "  a:", "    timeout-minutes: 1441", A_STEP), "3: job 'a': 'timeout-minutes' must be a number of minutes above 0 and at most 1440"],
  ["an infinite timeout", yaml("jobs:", "  a:", "    timeout-minutes: .inf", A_STEP), "3: job 'a': 'timeout-minutes' must be a number of minutes above 0 and at most 1440"],
  // cache
  ["a cache that is a string", yaml("jobs:", "  a:", "    cache: deps", A_STEP), "3: job 'a': 'cache' must be a map with 'key' and 'paths'"],
  ["a cache without a key", yaml("jobs:", "  a:", "    cache:", "      paths: [x]", A_STEP), "4: job 'a': 'cache' needs both 'key' and 'paths'"],
  ["a cache without paths", yaml("jobs:", "  a:", "    cache: {key: k}", A_STEP), "3: job 'a': 'cache' needs both 'key' and 'paths'"],
  ["an unknown cache key", yaml("jobs:", "  a:", "    cache: {key: k, paths: [x], restore: true}", A_STEP), "3: unknown key 'restore' in the cache of job 'a' (allowed: key, paths)"],
  ["an empty cache key", yaml("jobs:", "  a:", "    cache: {key: '', paths: [x]}", A_STEP), "3: job 'a': the cache key must be a non-empty string"],
  ["a cache key of 201 characters", yaml("jobs:", "  a:", `    cache: {key: ${"k".repeat(201)}, paths: [x]}`, A_STEP), "3: job 'a': the cache key must be at most 200 characters"],
  ["a control character in the cache key", yaml("jobs:", "  a:", '    cache: {key: "a\\tb", paths: [x]}', A_STEP), "3: job 'a': the cache key must not contain control characters"],
  ["an empty list of cache paths", yaml("jobs:", "  a:", "    cache: {key: k, paths: []}", A_STEP), "3: job 'a': cache 'paths' must be a list of at least one path"],
  [
    "an absolute cache path",
    yaml("jobs:", "  a:", "    cache:", "      key: k", "      paths:", "        - ok", "        - /etc", A_STEP),
    "7: job 'a': cache paths must be relative paths inside the workspace (no leading '/', no '..'), not \"/etc\""
  ],
  ["a cache path that climbs out", yaml("jobs:", "  a:", "    cache: {key: k, paths: [a/../../x]}", A_STEP), "3: job 'a': cache paths must be relative paths inside the workspace (no leading '/', no '..'), not \"a/../../x\""],
  ["an empty cache path", yaml("jobs:", "  a:", "    cache: {key: k, paths: ['']}", A_STEP), "3: job 'a': cache paths must be relative paths inside the workspace (no leading '/', no '..'), not \"\""],
  ["a control character in a cache path", yaml("jobs:", "  a:", '    cache: {key: k, paths: ["a\\nb"]}', A_STEP), "3: job 'a': cache paths must be relative paths inside the workspace (no leading '/', no '..'), not \"a\\nb\""],
  // network
  ["a network value that is not a boolean", yaml("jobs:", "  a:", "    network: off", A_STEP), "3: job 'a': 'network' must be true or false"],
  ["a workflow network of 0", yaml("network: 0", "jobs:", "  a:", A_STEP), "1: the workflow's 'network' must be true or false"],
  // Steps
  ["a step that is a string", yaml("jobs:", "  a:", "    steps:", "      - make"), "4: step 1 of job 'a' must be a map with 'run'"],
  ["an unknown step key", yaml("jobs:", "  a:", "    steps:", "      - run: x", "        shell: zsh"), "5: unknown key 'shell' in step 1 of job 'a' (allowed: name, run, env, timeout-minutes, continue-on-error)"],
  ["a step without run", yaml("jobs:", "  a:", "    steps:", "      - run: x", "      - name: hi"), "5: step 2 of job 'a' needs 'run'"],
  ["an empty run", yaml("jobs:", "  a:", "    steps:", "      - run: ''"), "4: step 1 of job 'a': 'run' must be a non-empty string"],
  ["a list for run", yaml("jobs:", "  a:", "    steps:", "      - run:", "          - make"), "5: step 1 of job 'a': 'run' must be a non-empty string"],
  ["a run over 64 KiB of UTF-8", yaml("jobs:", "  a:", "    steps:", `      - run: ${"é".repeat(32 * 1024 + 1)}`), "4: step 1 of job 'a': 'run' must be at most 64 KiB"],
  ["a step name of 201 characters", yaml("jobs:", "  a:", "    steps:", "      - run: x", `        name: ${"n".repeat(201)}`), "5: step 1 of job 'a': 'name' must be at most 200 characters"],
  ["continue-on-error that is not a boolean", yaml("jobs:", "  a:", "    steps:", "      - run: x", "        continue-on-error: yes"), "5: step 1 of job 'a': 'continue-on-error' must be true or false"]
]

describe("parseWorkflow", () => {
  it.each(VALID)("reads %s", (_what, text, expected) => {
    expect(parseWorkflow(PATH, text)).toEqual({ _tag: "Valid", workflow: expected })
  })

  it.each(INVALID)("refuses %s, naming the file and the line", (_what, text, error) => {
    expect(parseWorkflow(PATH, text)).toEqual({ _tag: "Invalid", name: "ci", path: PATH, error: `${PATH}:${error}` })
  })

  it("names the workflow and its errors after the file it was read from", () => {
    const path = ".oak/workflows/release.yaml"
    expect(parseWorkflow(path, yaml("jobs:", "  a:", A_STEP))).toMatchObject({ _tag: "Valid", workflow: { name: "release", path } })
    expect(parseWorkflow(path, yaml("jobs: 1"))).toEqual({ _tag: "Invalid", name: "release", path, error: `${path}:1: 'jobs' must be a map of at least one job` })
  })
})

describe("workflow paths", () => {
  it.each([
    [".oak/workflows/ci.yml", true],
    [".oak/workflows/ci.yaml", true],
    [".oak/workflows/a/b.yml", false],
    [".oak/workflows/.yml", false],
    [".oak/workflows/x.txt", false],
    [".oak/workflows/x.yml.txt", false],
    ["oak/workflows/x.yml", false],
    ["a/.oak/workflows/x.yml", false]
  ] as const)("%s is a workflow file: %s", (path, expected) => {
    expect(isWorkflowPath(path)).toBe(expected)
  })

  it.each([
    [".oak/workflows/ci.yml", "ci"],
    [".oak/workflows/release.yaml", "release"],
    [".oak/workflows/nightly.build.yml", "nightly.build"]
  ] as const)("%s is named %s", (path, expected) => {
    expect(workflowName(path)).toBe(expected)
  })
})
