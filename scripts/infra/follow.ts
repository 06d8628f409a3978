/**
 * `tail -F` for a few log files, inside this process: every complete line that is added to a
 * file is printed with the file's label in front, `node-1 | ...`, the labels padded to one
 * width (and coloured on a terminal, unless NO_COLOR is set).
 *
 *   const logs = yield* followLogs([{ label: "node-1", file: "/data/logs/node-1.log" }])   // until the scope closes
 *   yield* logs.flush   // print what the files hold now, e.g. before a message that should come after it
 *
 * Like `tail -F`, it waits for a file that does not exist yet, and reads a file again from its
 * start when it was truncated or replaced (another inode). It polls (every 250 ms by default)
 * rather than watching: fs.watch misses writes on some file systems, and a poll of a few
 * files costs nothing.
 */
import { Effect, Schedule, Semaphore } from "effect"
import type { Scope } from "effect"
import * as fs from "node:fs/promises"

export interface FollowedFile {
  readonly label: string
  readonly file: string
}

export interface Follower {
  /** Prints the lines added so far now, rather than at the next poll. */
  readonly flush: Effect.Effect<void>
}

export interface FollowOptions {
  /** Print the lines already in the files first (default), or only those added from now on. */
  readonly fromStart?: boolean | undefined
  readonly intervalMs?: number | undefined
  /** Where the prefixed lines go; default stdout. */
  readonly write?: ((text: string) => void) | undefined
}

/** At most this much of one file is read per poll, so one chatty file cannot starve the others. */
const CHUNK = 1 << 20

const COLORS = [36, 35, 33, 32, 34, 31]

interface State {
  offset: number
  inode: number | undefined
  partial: string
}

const errorCode = (error: unknown) => (error as NodeJS.ErrnoException | undefined)?.code

export const followLogs = (
  files: ReadonlyArray<FollowedFile>,
  options: FollowOptions = {}
): Effect.Effect<Follower, never, Scope.Scope> =>
  Effect.gen(function*() {
    const write = options.write ?? ((text: string) => void process.stdout.write(text))
    const color = options.write === undefined && process.stdout.isTTY && process.env.NO_COLOR === undefined
    const width = Math.max(0, ...files.map((f) => f.label.length))
    const prefixes = files.map((f, i) => {
      const label = `${f.label.padEnd(width)} | `
      return color ? `\x1b[${COLORS[i % COLORS.length]}m${label}\x1b[0m` : label
    })
    const states: Array<State> = []
    for (const f of files) {
      const size = options.fromStart === false
        ? yield* Effect.promise(() => fs.stat(f.file).then((s) => s.size, () => 0))
        : 0
      states.push({ offset: size, inode: undefined, partial: "" })
    }

    const emit = (i: number, text: string) => {
      const state = states[i]!
      const parts = (state.partial + text).split("\n")
      state.partial = parts.pop() ?? ""
      if (parts.length > 0) write(parts.map((line) => `${prefixes[i]}${line.replace(/\r$/, "")}\n`).join(""))
    }
    /** A file that was replaced or cut: its unfinished last line is printed as it is, then it starts over. */
    const restart = (i: number, inode: number | undefined) => {
      const state = states[i]!
      if (state.partial !== "") emit(i, "\n")
      state.offset = 0
      state.inode = inode
    }

    const poll = (i: number) => async () => {
      const { file } = files[i]!
      const state = states[i]!
      let handle: fs.FileHandle
      try {
        handle = await fs.open(file, "r")
      } catch (error) {
        if (errorCode(error) === "ENOENT") restart(i, undefined)
        return
      }
      try {
        const stat = await handle.stat()
        if (state.inode !== undefined && stat.ino !== state.inode) restart(i, stat.ino)
        state.inode = stat.ino
        if (stat.size < state.offset) restart(i, stat.ino)
        if (stat.size === state.offset) return
        const length = Math.min(CHUNK, stat.size - state.offset)
        const buffer = Buffer.alloc(length)
        const { bytesRead } = await handle.read(buffer, 0, length, state.offset)
        state.offset += bytesRead
        // A multi-byte character cut at the chunk's end shows as U+FFFD; log lines are short.
        emit(i, buffer.subarray(0, bytesRead).toString("utf8"))
      } finally {
        await handle.close()
      }
    }

    // One poll at a time: the poller and `flush` must not read the same bytes twice.
    const polling = yield* Semaphore.make(1)
    const tick = polling.withPermit(
      Effect.forEach(files, (_, i) => Effect.tryPromise(poll(i)).pipe(Effect.ignore), { discard: true })
    )
    // Registered before the poller, so it runs after the poller has stopped: the last lines
    // written before the scope closed (a stopping server's) are printed too.
    yield* Effect.addFinalizer(() => tick)
    yield* Effect.forkScoped(tick.pipe(Effect.repeat(Schedule.spaced(`${options.intervalMs ?? 250} millis`))))
    return { flush: tick }
  })
