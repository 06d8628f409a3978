/**
 * The quick answers' output (`grove --version`, the no-op push, an unchanged status: main.ts, bin/start.js) written
 * with fs.writeSync: `process.stdout` on a pipe or a terminal loads node:net or node:tty and the streams, ~5 ms of CPU
 * of a command that costs ~35 in all. A descriptor that would block (set non-blocking by someone else) takes the rest
 * through process.stdout as before.
 */
import * as fs from "node:fs"

export const writeStdout = (text: string): void => {
  const bytes = Buffer.from(text)
  let written = 0
  try {
    while (written < bytes.length) written += fs.writeSync(1, bytes, written)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EAGAIN") throw error
    process.stdout.write(bytes.subarray(written))
  }
}
