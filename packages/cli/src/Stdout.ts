/**
 * The client's output, written with fs.writeSync: `process.stdout` on a pipe or a terminal loads node:net or node:tty
 * and the streams, ~5 ms of CPU of a command that costs ~35 in all (the quick answers: `grove --version`, the no-op
 * push, an unchanged status, main.ts and bin/start.js; every other command through `outputConsole`, Run.ts). A
 * descriptor that would block (set non-blocking by someone else) takes the rest through process.stdout.
 *
 * Output that cannot be written (`grove status > /dev/full`: ENOSPC; a reader that went away: EPIPE) is reported once
 * and the exit is not 0, never a stack: one line on stderr, none for EPIPE (`grove log | head -1` is quiet, as git
 * is). The command still finishes what it was doing (a clone whose last line fails is a whole clone); what it would
 * print after that is dropped.
 */
import type { Console } from "effect"
import * as fs from "node:fs"

/** The first failed write to stdout. */
let failed: NodeJS.ErrnoException | undefined
/** Once a write went through the stream, the later ones do too (in order behind it). */
let viaStream = false

/** Whether some output could not be written (the exit code is then 1 at least). */
export const outputFailed = (): boolean => failed !== undefined

const describe = (error: NodeJS.ErrnoException): string => {
  if (typeof error.errno === "number" && typeof error.code === "string") {
    try {
      return `${process.getBuiltinModule("node:util").getSystemErrorMessage(error.errno)} (${error.code})`
    } catch {
      // Not a system error number: the message says it.
    }
  }
  return error.message
}

const report = (error: unknown): void => {
  if (failed !== undefined) return
  failed = error instanceof Error ? error : Object.assign(new Error(String(error)), { code: undefined })
  if (!process.exitCode) process.exitCode = 1
  if (failed.code === "EPIPE") return
  writeStderr(`grove: cannot write the output: ${describe(failed)}\n`)
}

/** Writes `bytes` whole to `fd`; the count written when it would block (EAGAIN), any other error thrown. */
const writeWhole = (fd: number, bytes: Buffer): number => {
  let written = 0
  try {
    while (written < bytes.length) written += fs.writeSync(fd, bytes, written)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EAGAIN") throw error
  }
  return written
}

/** `text` on stdout; a failure is reported (above), never thrown. */
export const writeStdout = (text: string): void => {
  if (failed !== undefined) return
  const bytes = Buffer.from(text)
  try {
    const written = viaStream ? 0 : writeWhole(1, bytes)
    if (written === bytes.length) return
    viaStream = true
    const stream = process.stdout
    if (!stream.listeners("error").includes(report)) stream.on("error", report)
    stream.write(bytes.subarray(written))
  } catch (error) {
    report(error)
  }
}

const ignore = () => undefined

/** `text` on stderr: a failure there has nowhere to be told, and does not stop the command. */
export const writeStderr = (text: string): void => {
  const bytes = Buffer.from(text)
  try {
    const written = writeWhole(2, bytes)
    if (written === bytes.length) return
    const stream = process.stderr
    if (!stream.listeners("error").includes(ignore)) stream.on("error", ignore)
    stream.write(bytes.subarray(written))
  } catch {
    // Lost: stderr itself is closed or full.
  }
}

const format = (args: ReadonlyArray<unknown>): string =>
  args.length === 1 && typeof args[0] === "string" ? args[0] : process.getBuiltinModule("node:util").format(...args)

/** Effect's `Console` over the writes above: `log`/`info` to stdout, `error`/`warn` to stderr. */
export const outputConsole = (): Console.Console =>
  Object.assign(Object.create(globalThis.console) as Console.Console, {
    log: (...args: ReadonlyArray<unknown>) => writeStdout(`${format(args)}\n`),
    info: (...args: ReadonlyArray<unknown>) => writeStdout(`${format(args)}\n`),
    error: (...args: ReadonlyArray<unknown>) => writeStderr(`${format(args)}\n`),
    warn: (...args: ReadonlyArray<unknown>) => writeStderr(`${format(args)}\n`)
  })
