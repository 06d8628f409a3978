/** Helpers for the exporters' tests: temp dirs and running real tools (git, unzip). */
import { execFile } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Effect, Stream } from "effect"

export const tempDir = Effect.acquireRelease(
  Effect.promise(() => fs.promises.mkdtemp(path.join(os.tmpdir(), "grove-export-"))),
  (dir) => Effect.promise(() => fs.promises.rm(dir, { recursive: true, force: true }))
)

/** Runs a tool to completion; fails the test with its stderr when it exits non-zero. */
export const run = (cmd: string, args: ReadonlyArray<string>, options: { readonly cwd?: string } = {}) =>
  Effect.promise(() =>
    new Promise<string>((resolve, reject) => {
      execFile(cmd, [...args], {
        cwd: options.cwd,
        maxBuffer: 64 * 1024 * 1024,
        env: {
          PATH: process.env["PATH"] ?? "/usr/bin:/bin",
          HOME: options.cwd ?? os.tmpdir(),
          GIT_CONFIG_NOSYSTEM: "1",
          GIT_TERMINAL_PROMPT: "0",
          LC_ALL: "C.UTF-8"
        }
      }, (error, stdout, stderr) => error ? reject(new Error(`${cmd} ${args.join(" ")}: ${error.message}\n${stderr}`)) : resolve(stdout))
    })
  )

/** Writes a byte stream to a file, returning the byte count. */
export const writeStream = <E>(stream: Stream.Stream<Uint8Array, E>, file: string): Effect.Effect<number, E> =>
  Effect.acquireUseRelease(
    Effect.promise(() => fs.promises.open(file, "w")),
    (handle) => {
      let count = 0
      return Stream.runForEach(stream, (chunk) => {
        count += chunk.length
        return Effect.promise(() => handle.write(chunk))
      }).pipe(Effect.map(() => count))
    },
    (handle) => Effect.promise(() => handle.close())
  )
