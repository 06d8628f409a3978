/** Starting a repository's manual CI runs and waiting for them, for the CI suites that drive the API. */
import { expect } from "@effect/vitest"
import type { api } from "./http.ts"
import { waitFor } from "./waitFor.ts"

/** `client()` is a signed-in API client; `repo` is `{owner}/{name}`. */
export const ciRuns = (client: () => ReturnType<typeof api>, repo: string, timeoutMs = 120_000) => ({
  /** Starts `workflow` (on `branch` when given) and answers its first run's id. */
  start: async (workflow: string, branch?: string) => {
    const reply = await client().post(`/${repo}/ci/runs`, branch === undefined ? { workflow } : { workflow, branch })
    expect(reply.status, JSON.stringify(reply.body)).toBe(201)
    return reply.body.run_ids[0] as number
  },
  /** The run once it completed. */
  completed: (id: number) =>
    waitFor(`run ${repo}#${id}`, async () => {
      const reply = await client().get(`/${repo}/ci/runs/${id}`)
      return reply.body.status === "completed" ? reply.body : undefined
    }, timeoutMs)
})

/** Every step's log of a run, in order. */
export const logsOf = (run: any): string => run.jobs.flatMap((job: any) => job.steps).map((step: any) => step.logs ?? "").join("")
