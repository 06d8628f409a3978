/**
 * The replies side of request/reply on Kafka: every node reads the whole
 * replies topic from its end (`KafkaTail`) and hands the replies keyed with
 * its node id to the waiting requests. Replies are small and short-lived, so
 * reading all of them costs little at Grove's cluster sizes and needs no
 * per-node topics to create and clean up. (`@platformatic/kafka` gives a lone
 * group member every partition, so reading only the node's own partition
 * would take a hand-written fetch loop.) Replies sent while the stream is
 * reopened are lost: their requests time out.
 */
import type { Tracker } from "./BusStatus.ts"
import type { GroupOptions } from "./KafkaPartitions.ts"
import * as KafkaTail from "./KafkaTail.ts"
import type { Replies } from "./Replies.ts"
import * as Topics from "./Topics.ts"

/** Reads replies for `nodeId` until the scope closes; returns once replies to new requests will be seen. */
export const read = (options: GroupOptions, nodeId: string, replies: Replies, broker: Pick<Tracker, "recovered" | "up">) =>
  KafkaTail.tail(options, Topics.replies, {
    name: `${nodeId}-replies`,
    filter: (message) => message.key === nodeId,
    onRecord: replies.complete,
    broker
  })
