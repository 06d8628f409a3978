/**
 * A CI step the caller lets go: it prints its checkout's path, a coloured line and `$API_TOKEN`, opens a
 * colour, waits for a marker file in its checkout (which the test or bench writes from the host: the checkout is bound into the
 * sandbox at the same path), then prints its clock in ms, so the delay to a reader seeing that line can be
 * measured. Used by the CI browser suites and `npm run bench:web`.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { waitFor } from "./waitFor.ts"

export const LIVE_WORKFLOW = [
  "on: [manual]",
  "jobs:",
  "  follow:",
  "    name: Follow me",
  "    steps:",
  "      - name: talk",
  "        run: |",
  "          echo \"workdir=$PWD\"",
  "          printf '\\033[1;31mred alert\\033[0m <b>not bold</b>\\n'",
  "          echo \"token=$API_TOKEN\"",
  // A colour left open across the wait: the live lines must carry it on from where the page's log ended.
  "          printf '\\033[32mgreen from before the wait, '",
  "          i=0",
  "          while [ ! -f go.marker ]; do sleep 0.02; i=$((i+1)); if [ $i -gt 15000 ]; then exit 9; fi; done",
  "          printf 'green after it\\033[0m\\n'",
  "          echo \"later line printed at $(date +%s%3N)\""
].join("\n")

/** The step's checkout, once it printed it: `run` reads the API's run (with logs). */
export const liveWorkdir = (run: () => Promise<any>, timeoutMs = 120_000) =>
  waitFor("the live step's workdir line", async () => {
    const body = await run()
    const logs = (body?.jobs ?? []).flatMap((job: any) => job.steps).map((step: any) => step.logs ?? "").join("")
    return /workdir=(\S+)/.exec(logs)?.[1]
  }, timeoutMs)

/** Lets the step go on: it prints the later line. */
export const releaseStep = (workdir: string) => fs.writeFileSync(path.join(workdir, "go.marker"), "go\n")

/** When the step printed the later line (ms since the epoch), from text that holds it; NaN if not there. */
export const printedAt = (text: string) => Number(/later line printed at (\d+)/.exec(text)?.[1])
