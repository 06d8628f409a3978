/**
 * Which runs an event or a request starts: the workflows at a commit, chosen by name or by
 * event, planned as the QueueCiRuns command carries them (invalid files included, as runs that
 * fail at once with the parser's error).
 */
import type { ParsedWorkflow, WorkflowEvent } from "@grove/core/ci/Workflow"
import { jobsSkeleton } from "./CiRecord.ts"
import type { PlannedRun } from "./CiQueueCommand.ts"

export const planRun = (parsed: ParsedWorkflow): PlannedRun =>
  parsed._tag === "Valid"
    ? {
      workflowName: parsed.workflow.name,
      workflowPath: parsed.workflow.path,
      workflow: JSON.stringify(parsed.workflow),
      jobs: JSON.stringify(jobsSkeleton(parsed.workflow)),
      error: null
    }
    : { workflowName: parsed.name, workflowPath: parsed.path, workflow: null, jobs: "[]", error: parsed.error }

const nameOf = (parsed: ParsedWorkflow) => parsed._tag === "Valid" ? parsed.workflow.name : parsed.name

/**
 * The workflows to run. A named one runs whatever its `on` says (it was asked for by name);
 * otherwise those whose `on` has the event. An invalid file always runs (and fails), so it is
 * never skipped silently.
 */
export const selectWorkflows = (
  workflows: ReadonlyArray<ParsedWorkflow>,
  event: WorkflowEvent,
  name?: string | null
): ReadonlyArray<ParsedWorkflow> =>
  name !== undefined && name !== null
    ? workflows.filter((parsed) => nameOf(parsed) === name)
    : workflows.filter((parsed) => parsed._tag === "Invalid" || parsed.workflow.on.includes(event))
