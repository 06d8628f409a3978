import { describe, expect, it } from "@effect/vitest"
import { Console, Effect, Layer } from "effect"
import { captureConsole, closedPort, envLayer, scriptedInteraction, tempDir } from "../test/support.ts"
import { VERSION_LINE } from "./BuildInfo.ts"
import { run, wantsJson } from "./Cli.ts"

/** Runs `grove <argv>` in a temporary home; answers the exit code and what was printed. */
const grove = (argv: ReadonlyArray<string>, options: { readonly terminal?: boolean; readonly answers?: ReadonlyArray<string>; readonly env?: Record<string, string> } = {}) =>
  Effect.gen(function*() {
    const home = yield* tempDir("home")
    const captured = captureConsole()
    const interaction = scriptedInteraction(options.terminal ?? false, options.answers)
    const exitCode = yield* run(argv).pipe(
      Effect.provide(Layer.merge(envLayer({ home, cwd: home, env: options.env ?? {} }), interaction.layer)),
      Effect.provideService(Console.Console, captured.console)
    )
    return { exitCode, stdout: captured.stdout.join("\n"), stderr: captured.stderr.join("\n"), prompts: interaction.prompts }
  })

const offline = Effect.map(closedPort, (port) => `http://127.0.0.1:${port}`)

describe("grove argument parsing", () => {
  it.live("--help and -h print help on stdout and exit 0, for every command", () =>
    Effect.gen(function*() {
      for (const argv of [["--help"], ["-h"], ["repo", "--help"], ["repo", "create", "-h"], ["auth", "status", "--help"], ["login", "--help"], ["logout", "-h"], ["repo", "delete", "--help"]]) {
        const result = yield* grove(argv)
        expect(result.exitCode, argv.join(" ")).toBe(0)
        expect(result.stdout, argv.join(" ")).toContain("USAGE")
        expect(result.stderr).toBe("")
      }
      const create = yield* grove(["repo", "create", "--help"])
      for (const flag of ["--org SLUG", "--public", "--description TEXT", "--json", "--remote URL"]) expect(create.stdout).toContain(flag)
      // --remote never moves a checkout's own commands off its server (Session.remoteOf), as the README says.
      for (const argv of [["--help"], ["push", "--help"]]) {
        const line = (yield* grove(argv)).stdout.split("\n").find((l) => l.trimStart().startsWith("--remote URL"))
        expect(line, argv.join(" ")).toContain("else the checkout's")
        expect(line, argv.join(" ")).toContain("push, pull, merge and the other commands on it (without --repo) always talk to the checkout's server")
      }
      // The line main.ts prints for `--version` alone without loading effect/cli.
      expect((yield* grove(["--version"])).stdout).toBe(VERSION_LINE)
      expect((yield* grove(["-v", "--json"])).stdout).toBe(VERSION_LINE)
    }))

  it.live("usage errors exit 2 with the help and the error on stderr, nothing on stdout", () =>
    Effect.gen(function*() {
      const cases: Array<[ReadonlyArray<string>, string]> = [
        [[], "SUBCOMMANDS"],
        [["repo"], "SUBCOMMANDS"],
        [["frobnicate"], "Unknown subcommand \"frobnicate\""],
        [["repo", "list", "--sort", "size"], "Invalid value for flag --sort: \"size\""],
        [["repo", "list", "--bogus"], "Unrecognized flag: --bogus"],
        [["repo", "create"], "Missing required argument: name"],
        [["repo", "show", "a/b", "c/d"], "Unexpected positional argument: \"c/d\""],
        [["repo", "create", "x", "--org"], "--org"],
        [["repo", "show", "just-a-name"], "expected a repository as owner/name"],
        [["repo", "show", "a/b/c"], "expected a repository as owner/name"],
        [["repo", "create", "bad name"], "invalid repository name"],
        [["repo", "create", "ok", "--org", "Bad_Org"], "invalid --org"],
        [["repo", "list", "--remote", "ftp://example.com"], "--remote: not an http(s) server address"]
      ]
      for (const [argv, message] of cases) {
        const result = yield* grove(argv)
        expect(result.exitCode, argv.join(" ")).toBe(2)
        expect(result.stdout, argv.join(" ")).toBe("")
        expect(result.stderr, argv.join(" ")).toContain(message)
      }
      const badEnv = yield* grove(["repo", "list"], { env: { GROVE_REMOTE: "not a url" } })
      expect(badEnv.exitCode).toBe(2)
      expect(badEnv.stderr).toContain("GROVE_REMOTE: not an http(s) server address")
    }))

  it.live("with --json a usage error is one JSON document on stdout", () =>
    Effect.gen(function*() {
      for (const argv of [["repo", "list", "--sort", "size", "--json"], ["--json", "repo", "show", "nope"], ["--json"]]) {
        const result = yield* grove(argv)
        expect(result.exitCode).toBe(2)
        expect(JSON.parse(result.stdout)).toMatchObject({ code: "usage", error: expect.any(String) })
      }
    }))

  it("sees --json before a `--` only", () => {
    expect(wantsJson(["repo", "list", "--json"])).toBe(true)
    expect(wantsJson(["--json=true", "repo"])).toBe(true)
    expect(wantsJson(["repo", "show", "--", "--json"])).toBe(false)
    expect(wantsJson(["repo", "list"])).toBe(false)
  })
})

describe("grove exit codes without a server", () => {
  it.live("cannot connect: exit 6, human message on stderr or a JSON error on stdout", () =>
    Effect.gen(function*() {
      const remote = yield* offline
      const human = yield* grove(["repo", "list", "--remote", remote])
      expect(human.exitCode).toBe(6)
      expect(human.stdout).toBe("")
      expect(human.stderr).toMatch(new RegExp(`^grove: cannot connect to ${remote}`))

      const json = yield* grove(["--json", "repo", "show", "alice/demo"], { env: { GROVE_REMOTE: remote } })
      expect(json.exitCode).toBe(6)
      expect(JSON.parse(json.stdout)).toMatchObject({ code: "network" })
    }))

  it.live("an on/off flag never takes the next word as its value: ci logs -f 1, --json 1, -y 1", () =>
    Effect.gen(function*() {
      const remote = yield* offline
      // Each reaches the server (exit 6 here); before, `-f` took `1` and the run id was missing (exit 2).
      const ci = ["--repo", "alice/demo", "--remote", remote]
      for (const argv of [["ci", "logs", "-f", "1", ...ci], ["ci", "logs", "--follow", "1", ...ci], ["ci", "logs", "--json", "1", ...ci], ["repo", "delete", "-y", "alice/demo", "--remote", remote]]) {
        const result = yield* grove(argv)
        expect(result.exitCode, `${argv.join(" ")}: ${result.stdout}${result.stderr}`).toBe(6)
        expect(result.stderr).not.toContain("Missing required argument")
      }
      // An explicit value still works when attached.
      expect((yield* grove(["ci", "logs", "1", "--follow=false", "--repo", "alice/demo", "--remote", remote])).exitCode).toBe(6)
    }))

  it.live("auth status with no credential: exit 6", () =>
    Effect.gen(function*() {
      const remote = yield* offline
      const result = yield* grove(["auth", "status", "--remote", remote, "--json"])
      expect(result.exitCode).toBe(6)
      expect(JSON.parse(result.stdout)).toEqual({
        error: `no credential for ${remote}: run grove login, or set SERVICE_API_KEY`,
        code: "no_credential",
        remote,
        credential: null,
        passed: []
      })
    }))

  it.live("logout without a session succeeds and says so", () =>
    Effect.gen(function*() {
      const result = yield* grove(["logout", "--remote", "http://127.0.0.1:8080/", "--json"])
      expect(result.exitCode).toBe(0)
      expect(JSON.parse(result.stdout)).toEqual({ remote: "http://127.0.0.1:8080", removed: false })
    }))

  it.live("repo delete: refuses on a pipe without --yes (2); on a terminal asks for the name", () =>
    Effect.gen(function*() {
      const remote = yield* offline
      const pipe = yield* grove(["repo", "delete", "alice/demo", "--remote", remote])
      expect(pipe.exitCode).toBe(2)
      expect(pipe.stderr).toContain("without --yes when stdin is not a terminal")

      const wrong = yield* grove(["repo", "delete", "alice/demo", "--remote", remote], { terminal: true, answers: ["alice/other"] })
      expect(wrong.prompts).toEqual(["Type alice/demo to confirm: "])
      expect(wrong.exitCode).toBe(1)
      expect(wrong.stderr).toContain("not confirmed; nothing was deleted")

      // Confirmed (or --yes): it goes on to the server, which is not there.
      const confirmed = yield* grove(["repo", "delete", "alice/demo", "--remote", remote], { terminal: true, answers: ["alice/demo"] })
      expect(confirmed.exitCode).toBe(6)
      const yes = yield* grove(["repo", "delete", "alice/demo", "-y", "--remote", remote])
      expect(yes.exitCode).toBe(6)
    }))
})
