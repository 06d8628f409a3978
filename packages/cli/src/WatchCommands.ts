/**
 * `grove watch start|stop|status`: the checkout's opt-in file watcher (watch/WatchDaemon.ts), which lets `grove push`
 * and `grove status` stat only the files changed since they last looked instead of every file. The bodies are
 * imported on first use, like every command's.
 */
import { Effect, Option } from "effect"
import { Command } from "effect/cli"
import { findCheckout } from "./Checkout.ts"
import { CliEnv } from "./CliEnv.ts"
import { action, load } from "./CommandAction.ts"
import { errorMessage } from "./local/Files.ts"
import { failure } from "./Failures.ts"
import { Output } from "./Output.ts"

const control = () => load(() => import("./watch/WatchControl.ts"))

const checkoutRoot = Effect.gen(function*() {
  const { cwd, home } = yield* CliEnv
  const found = yield* findCheckout(cwd, home)
  if (Option.isNone(found)) return yield* failure("not in a grove checkout (run grove init or grove clone)", "not_a_checkout")
  return found.value.root
})

const start = Command.make("start", {}, () =>
  action(() =>
    Effect.gen(function*() {
      const root = yield* checkoutRoot
      const m = yield* control()
      const started = yield* Effect.tryPromise({ try: () => m.startWatch(root), catch: (e) => failure(errorMessage(e), "watch_failed") })
      yield* (yield* Output).result(
        { running: true, started: started.started, pid: started.pid ?? null },
        () => started.started ? `Watching ${root} (pid ${started.pid}).` : `Already watching ${root}${started.pid === undefined ? "" : ` (pid ${started.pid})`}.`
      )
    }))).pipe(Command.withDescription("Start this checkout's file watcher: push and status then stat only what changed"))

const stop = Command.make("stop", {}, () =>
  action(() =>
    Effect.gen(function*() {
      const root = yield* checkoutRoot
      const m = yield* control()
      const stopped = yield* Effect.tryPromise({ try: () => m.stopWatch(root), catch: (e) => failure(errorMessage(e), "watch_failed") })
      yield* (yield* Output).result({ running: false, stopped }, () => stopped ? "Stopped the file watcher." : "No file watcher was running.")
    }))).pipe(Command.withDescription("Stop this checkout's file watcher"))

const status = Command.make("status", {}, () =>
  action(() =>
    Effect.gen(function*() {
      const root = yield* checkoutRoot
      const m = yield* control()
      const now = yield* Effect.promise(() => m.watchStatus(root))
      yield* (yield* Output).result(
        { running: now.running, pid: now.pid ?? null, socket: now.socket },
        () => now.running ? `Watching (pid ${now.pid}, ${now.socket}).` : "Not watching: push and status stat every file."
      )
    }))).pipe(Command.withDescription("Say whether this checkout's file watcher runs"))

export const watch = Command.make("watch").pipe(
  Command.withDescription("An opt-in file watcher per checkout, so push and status need not stat every file"),
  Command.withSubcommands([start, stop, status])
)
