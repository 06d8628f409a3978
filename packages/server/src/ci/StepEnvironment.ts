/**
 * A cold step's variables on their way into its sandbox. The processes before the drop to the job's user (as root: the
 * process starter, nsenter, setpriv) or outside the sandbox (pasta, bwrap) get them packed under names nothing reads
 * (stepEnvironment); inside, as the job's user, they are unpacked: mostly by the step's shell itself, on the first line
 * of its script; when one of them acts at a shell's start-up, by a shell of its own that starts the step's with them.
 *
 * What the step can see of this about itself only (accepted): its shell's /proc/$$/environ is the block it started with
 * (the packed names, PATH=/usr/bin:/bin, RUNNER_LANG), readable by its own uid and root; its /proc/$$/cmdline shows
 * the prelude before its script. `env`, `declare -p` and its children see exactly its variables.
 */
import { realpathSync } from "node:fs"

/** The step's shell around its script. */
export const stepArgv = (run: string) => ["/bin/bash", "--noprofile", "--norc", "-e", "-o", "pipefail", "-c", run]

/**
 * The step's shell for `run`, as the job's user inside the sandbox, started with stepEnvironment(env): it sees exactly
 * `env`. Unpacked by that shell itself (UNPACK_PRELUDE) when it then behaves as one given `env` would (unpacksInShell),
 * else by a shell before it (unpackEnv: one more bash and env per step, ~3 ms of wall time).
 */
export const stepShell = (env: Readonly<Record<string, string>>, workspace: string, run: string): ReadonlyArray<string> =>
  unpacksInShell(env, workspace) ? stepArgv(UNPACK_PRELUDE + run) : [...unpackEnv, ...stepArgv(run)]

/**
 * The locale the runner gives every step (Runner.baseEnv). Not workflow input, so the processes before the drop may
 * have it too: the step's shell starts with it and parses its first line in it, as a shell given the step's variables
 * would (bash reads LANG at start; `$'\u00e9'` is decoded as the line is parsed, before the prelude's export).
 */
export const RUNNER_LANG = "C.UTF-8"

/** Where the step's variables travel, each under its own name after this prefix: a name no loader nor libc reads. */
const PACKED = "GROVE_STEP_ENV_"

/**
 * The environment a cold step's command starts with. Its first processes run before the drop to the job's user (as
 * root: the process starter, nsenter, setpriv) or outside the sandbox (pasta, bwrap): given the step's variables as
 * they are, a workflow's `LD_PRELOAD=./x.so` would load a committed library into them. So they get a fixed PATH, and
 * every variable of the step under PACKED's prefix (not in argv: other host users can read that); and the runner's own
 * LANG as it is, when the step has that one.
 */
export const stepEnvironment = (env: Readonly<Record<string, string>>): Record<string, string> => {
  const packed: Record<string, string> = env.LANG === RUNNER_LANG ? { PATH: "/usr/bin:/bin", LANG: RUNNER_LANG } : { PATH: "/usr/bin:/bin" }
  for (const [name, value] of Object.entries(env)) packed[PACKED + name] = value
  return packed
}

/** Inside the sandbox, as the step's user: replaces itself with the rest of its argv under exactly the unpacked variables. */
const unpackEnv = [
  "/bin/bash", "--noprofile", "--norc", "-c",
  `args=(); for name in "\${!${PACKED}@}"; do args+=("\${name#${PACKED}}=\${!name}"); done; exec /usr/bin/env -i "\${args[@]}" "$@"`,
  "grove-step"
]

/**
 * Unpacks the step's variables in its own shell, before `run` on the same line (the script's line numbers stay its
 * own): the packed ones and the start-up PATH gone, each variable exported under its name, the execution string and
 * `$_` as bash set them for `run` alone. Positional parameters only, so no variable of the step is overwritten.
 */
const preludeWith = (skip: number) =>
  `unset PATH;set -- "\${!${PACKED}@}";while (($#));do export "\${1#${PACKED}}=\${!1}";unset "$1";shift;done;` +
  `BASH_EXECUTION_STRING=\${BASH_EXECUTION_STRING:${skip}};: "$0";`
/** The prelude whose own length it skips. */
const UNPACK_PRELUDE = (() => {
  let length = 0
  while (preludeWith(length).length !== length) length = preludeWith(length).length
  return preludeWith(length)
})()


/**
 * Names that make bash or the C library act at start-up (options, locale, loader, tunables) or that bash keeps as its
 * own (readonly, dynamic): a step with one of them is unpacked by unpackEnv, so its shell starts with it as before.
 */
const STARTUP_PREFIXES = /^(BASH|LD_|GLIBC_|MALLOC_|LC_|COMP_|HIST|READLINE_|GROVE_STEP_ENV_)/
const STARTUP_NAMES = new Set([
  "SHELLOPTS", "ENV", "POSIXLY_CORRECT", "POSIX_PEDANTIC", "SHLVL", "OLDPWD", "UID", "EUID", "PPID", "GROUPS", "IFS",
  "LINENO", "RANDOM", "SRANDOM", "SECONDS", "EPOCHSECONDS", "EPOCHREALTIME", "FUNCNAME", "FUNCNEST", "DIRSTACK",
  "PIPESTATUS", "OPTIND", "OPTARG", "OPTERR", "SHELL", "HOSTNAME", "HOSTTYPE", "OSTYPE", "MACHTYPE", "_", "LANGUAGE",
  "TZ", "TZDIR", "GCONV_PATH", "LOCPATH", "NLSPATH", "TEXTDOMAIN", "TEXTDOMAINDIR", "INSIDE_EMACS", "EMACS", "TMOUT",
  "IGNOREEOF", "MAIL", "MAILCHECK", "MAILPATH", "PS1", "PS2", "PS3", "PS4", "PROMPT_COMMAND", "PROMPT_DIRTRIM",
  "GLOBIGNORE", "GLOBSORT", "EXECIGNORE", "FIGNORE", "CDPATH", "HOSTFILE", "INPUTRC", "TERMCAP", "TERMINFO", "CHILD_MAX",
  "auto_resume", "histchars", "TIMEFORMAT", "COLUMNS", "LINES", "HOSTALIASES", "RES_OPTIONS", "LOCALDOMAIN"
])
const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/

/**
 * Whether the step's shell can unpack its own variables and behave exactly as one started with them: every name a
 * plain one bash can export, none of STARTUP_*, a PATH (else bash's own default would be kept), no LANG but the
 * runner's (which the shell starts with: stepEnvironment), and PWD, if there, the canonical workspace (the directory
 * bash finds itself in at start).
 */
export const unpacksInShell = (env: Readonly<Record<string, string>>, workspace: string): boolean => {
  if (env.PATH === undefined || (env.LANG !== undefined && env.LANG !== RUNNER_LANG)) return false
  for (const name of Object.keys(env)) {
    if (!NAME.test(name) || STARTUP_PREFIXES.test(name) || STARTUP_NAMES.has(name)) return false
  }
  return env.PWD === undefined || (env.PWD === workspace && canonical(workspace))
}

const canonical = (dir: string) => {
  try {
    return realpathSync.native(dir) === dir
  } catch {
    return false
  }
}
