/**
 * The Branch entity (key `owner/name:branch`, in its repository's partition): the branch's own
 * commands (push, create, close, reopen), finishing a staged push, and queuing CI runs, which the
 * exact-head trigger must serialize with pushes.
 */
import { Entity } from "@grove/bus"
import * as CiQueue from "../ci/CiQueueCommand.ts"
import * as BranchCommands from "../content/BranchCommands.ts"
import * as FinalizeStage from "../staged-push/FinalizeStageCommand.ts"

export const BranchEntity = Entity.make("Branch", {
  ...BranchCommands.commands,
  ...CiQueue.commands,
  ...FinalizeStage.commands
}, { partitionKey: (entityId) => BranchCommands.splitBranchKey(entityId)[0] })

export const handlers: Entity.Handlers<typeof BranchEntity> = {
  ...BranchCommands.handlers,
  ...CiQueue.handlers,
  ...FinalizeStage.handlers
}
