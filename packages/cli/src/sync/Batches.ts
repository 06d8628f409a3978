/**
 * How a transfer's chunks are grouped into requests, both ways (Outgoing: chunks/batch uploads; Download: chunks/fetch).
 */

/** `items` in order, in batches of at most `maxEntries` items and `maxBytes` by `sizeOf` (or one item, when larger). */
export const inBatches = <A>(
  items: Iterable<A>,
  sizeOf: (item: A) => number,
  maxEntries: number,
  maxBytes: number
): Array<Array<A>> => {
  const batches: Array<Array<A>> = []
  let current: Array<A> = []
  let bytes = 0
  for (const item of items) {
    const size = sizeOf(item)
    if (current.length > 0 && (current.length >= maxEntries || bytes + size > maxBytes)) {
      batches.push(current)
      current = []
      bytes = 0
    }
    current.push(item)
    bytes += size
  }
  if (current.length > 0) batches.push(current)
  return batches
}
