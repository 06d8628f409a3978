import { compatibilityPartitioner } from "@platformatic/kafka"
import { assert, describe, it } from "@effect/vitest"
import { murmur2, partitionFor } from "./murmur2.ts"

const bytes = (s: string) => new TextEncoder().encode(s)

describe("murmur2", () => {
  it("matches the vectors of Kafka's UtilsTest.testMurmur2", () => {
    const cases: ReadonlyArray<readonly [Uint8Array, number]> = [
      [bytes("21"), -973932308],
      [bytes("foobar"), -790332482],
      [bytes("a-little-bit-long-string"), -985981536],
      [bytes("a-little-bit-longer-string"), -1486304829],
      [bytes("lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8"), -58897971],
      [new Uint8Array([0x61, 0x62, 0x63]), 479470107]
    ]
    for (const [input, expected] of cases) assert.strictEqual(murmur2(input), expected)
  })

  it("matches the vectors Akka checks against Kafka's Utils.murmur2", () => {
    const cases = [["1", -1993445489], ["12", 126087238], ["123", -267702483], ["1234", -1614185708], [
      "12345",
      -1188365604
    ]] as const
    for (const [input, expected] of cases) assert.strictEqual(murmur2(bytes(input)), expected)
  })

  it("agrees with @platformatic/kafka's compatibilityPartitioner on every key", () => {
    for (let i = 0; i < 5000; i++) {
      const key = i % 3 === 0 ? `owner-${i}/repo-${i * 7}` : i % 3 === 1 ? `ключ-${i}-✓` : `${i}`
      for (const partitions of [1, 7, 16, 32]) {
        const theirs = compatibilityPartitioner(undefined as never, Buffer.from(key, "utf8") as never) % partitions
        assert.strictEqual(partitionFor(key, partitions), theirs, key)
      }
    }
  })

  it("hashes the empty key like Kafka", () => {
    // the value @platformatic/kafka's murmur2 also gives
    assert.strictEqual(murmur2(new Uint8Array(0)), 275646681)
  })
})
