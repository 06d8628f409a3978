/**
 * Named points where the end-to-end tests kill the client, to prove that an interrupted command
 * leaves a checkout that the next command repairs. `GROVE_TEST_CRASH_AT=<name>` makes the process
 * SIGKILL itself on reaching `<name>`; nothing else reads the variable, and without it this is a
 * no-op.
 */
import { Effect } from "effect"

export type CrashPoint =
  | "commit:trees" // the snapshot's trees are written, the blobs not yet kept, no commit yet
  | "commit:blobs" // the blobs are kept too, no commit yet
  | "commit:saved" // the commit is in the branch's unpushed list, the index not yet rewritten
  | "push:repository" // the repository exists on the server, nothing uploaded
  | "push:uploaded" // the blobs are uploaded, the branch not yet moved
  | "push:sent" // the server moved the branch, the checkout does not know yet

export const crashPoint = (name: CrashPoint): Effect.Effect<void> =>
  Effect.sync(() => {
    if (process.env["GROVE_TEST_CRASH_AT"] === name) process.kill(process.pid, "SIGKILL")
  })
