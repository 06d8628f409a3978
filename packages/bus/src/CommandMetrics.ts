/**
 * Entity command metrics, recorded by the partition workers: commands by entity type, command and
 * outcome, and their latency (from the record's arrival at the worker to its reply) per partition.
 */
import * as MetricHandles from "./MetricHandles.ts"

const commands = MetricHandles.counterSeries("grove_entity_commands_total", "Entity commands handled by this node, by outcome")
const latency = MetricHandles.histogramSeries(
  "grove_entity_command_duration_seconds",
  "Entity command latency on the owning node (transaction and reply), by entity type, command and partition"
)

export type Outcome = "success" | "failure" | "defect"

export const record = (entityType: string, command: string, outcome: Outcome, partition: number, seconds: number) => {
  const name = `${entityType}\u0000${command}`
  commands(`${name}\u0000${outcome}`, () => ({ entity_type: entityType, command, outcome }))
    .updateUnsafe(1, MetricHandles.DEFAULT_CONTEXT)
  latency(`${name}\u0000${partition}`, () => ({ entity_type: entityType, command, partition: String(partition) }))
    .updateUnsafe(seconds, MetricHandles.DEFAULT_CONTEXT)
}
