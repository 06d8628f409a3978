/**
 * Kafka's default partitioner: murmur2 (the variant in Kafka's Java client,
 * `Utils.murmur2`) over the UTF-8 bytes of the key, made positive with
 * `& 0x7fffffff`, modulo the partition count. Both buses use this one function,
 * so a key lands on the same partition in embedded and cluster mode, and on
 * the same partition as any Java or librdkafka producer would put it.
 */

const SEED = 0x9747b28c
const M = 0x5bd1e995
const encoder = new TextEncoder()

/** The signed 32-bit murmur2 hash, exactly as `org.apache.kafka.common.utils.Utils.murmur2`. */
export const murmur2 = (data: Uint8Array): number => {
  const length = data.length
  let h = (SEED ^ length) | 0
  const blocks = length >>> 2
  for (let i = 0; i < blocks; i++) {
    const o = i << 2
    let k = (data[o]! | (data[o + 1]! << 8) | (data[o + 2]! << 16) | (data[o + 3]! << 24)) | 0
    k = Math.imul(k, M)
    k ^= k >>> 24
    k = Math.imul(k, M)
    h = Math.imul(h, M) ^ k
  }
  // The last 1 to 3 bytes (Java's fall-through switch).
  const tail = blocks << 2
  const rest = length & 3
  if (rest === 3) h ^= data[tail + 2]! << 16
  if (rest >= 2) h ^= data[tail + 1]! << 8
  if (rest >= 1) {
    h ^= data[tail]!
    h = Math.imul(h, M)
  }
  h ^= h >>> 13
  h = Math.imul(h, M)
  h ^= h >>> 15
  return h | 0
}

/** `Utils.toPositive(murmur2(key)) % partitions`, the partition Kafka's default partitioner picks. */
export const partitionFor = (key: string, partitions: number): number =>
  (murmur2(encoder.encode(key)) & 0x7fffffff) % partitions
