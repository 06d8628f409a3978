import { describe, expect, it } from "@effect/vitest"
import * as path from "node:path"
import { ConfigError, DEFAULT_KAFKA_SESSION_TIMEOUT_MS, parseConfig } from "./Config.ts"

describe("Config", () => {
  it("defaults to embedded mode on 127.0.0.1:8080 with ./.grove-data", () => {
    const config = parseConfig([], {})
    expect(config).toMatchObject({ mode: "embedded", host: "127.0.0.1", port: 8080, siteUrl: "http://127.0.0.1:8080" })
    expect(config.dataDir).toBe(path.resolve(".grove-data"))
    expect(config.kafkaPrefix).toBe("")
  })

  it("reads the environment, and flags win over it", () => {
    const env = { GROVE_PORT: "9000", GROVE_HOST: "0.0.0.0", GROVE_DATA_DIR: "/tmp/x", GROVE_SITE_URL: "https://grove.example/" }
    expect(parseConfig([], env)).toMatchObject({ port: 9000, host: "0.0.0.0", dataDir: "/tmp/x", siteUrl: "https://grove.example" })
    expect(parseConfig(["--port", "9001", "--data-dir=/tmp/y"], env)).toMatchObject({ port: 9001, dataDir: "/tmp/y" })
  })

  it("reads trusted proxies as CIDR networks and refuses anything else", () => {
    expect(parseConfig([], {}).trustedProxies).toEqual([])
    expect(parseConfig(["--trusted-proxies", "10.0.0.0/8, fd00::/8"], {}).trustedProxies).toEqual(["10.0.0.0/8", "fd00::/8"])
    expect(() => parseConfig([], { GROVE_TRUSTED_PROXIES: "10.0.0.1" })).toThrow(/GROVE_TRUSTED_PROXIES/)
  })

  it("needs Kafka, PostgreSQL and S3 addresses in cluster mode", () => {
    expect(() => parseConfig(["--mode", "cluster"], {})).toThrow(ConfigError)
    const config = parseConfig(["--mode", "cluster"], {
      GROVE_KAFKA_BROKERS: "127.0.0.1:9092, 127.0.0.1:9093",
      GROVE_DATABASE_URL: "postgres://u:p@127.0.0.1:5432/grove",
      GROVE_S3_ENDPOINT: "http://127.0.0.1:9000",
      GROVE_KAFKA_PREFIX: "staging.",
      GROVE_SECRET_KEY: Buffer.alloc(32, 7).toString("base64")
    })
    expect(config.kafkaBrokers).toEqual(["127.0.0.1:9092", "127.0.0.1:9093"])
    expect(config.kafkaPrefix).toBe("staging.")
    expect(Buffer.from(config.secretKey!)).toEqual(Buffer.alloc(32, 7))
  })

  it("needs the same secret key on every cluster node, and only 32 bytes of it", () => {
    const cluster = {
      GROVE_KAFKA_BROKERS: "127.0.0.1:9092",
      GROVE_DATABASE_URL: "postgres://u:p@127.0.0.1:5432/grove",
      GROVE_S3_ENDPOINT: "http://127.0.0.1:9000"
    }
    expect(() => parseConfig(["--mode", "cluster"], cluster)).toThrow(/GROVE_SECRET_KEY/)
    expect(parseConfig(["--mode", "cluster", "--secret-key-file", "/etc/grove/key"], cluster).secretKeyFile).toBe("/etc/grove/key")
    expect(() => parseConfig([], { GROVE_SECRET_KEY: "c2hvcnQ=" })).toThrow(/32 bytes/)
  })

  it("reads the CI runner's settings, with defaults", () => {
    expect(parseConfig([], {}).ci).toMatchObject({ concurrency: 2, queueLimit: 100, stepOutputLimitBytes: 1048576, runAsUser: "nobody" })
    expect(parseConfig(["--ci-concurrency", "4"], {}).ci?.concurrency).toBe(4)
    expect(() => parseConfig(["--ci-concurrency", "0"], {})).toThrow(/GROVE_CI_CONCURRENCY/)
    expect(() => parseConfig(["--ci-user", "../root"], {})).toThrow(/GROVE_CI_USER/)
  })

  it("takes the Kafka session timeout from a flag or the environment, 3 s by default, 1 s to 30 min", () => {
    expect(DEFAULT_KAFKA_SESSION_TIMEOUT_MS).toBe(3000)
    expect(parseConfig([], {}).kafkaSessionTimeoutMs).toBe(3000)
    expect(parseConfig([], { GROVE_KAFKA_SESSION_TIMEOUT_MS: "6000" }).kafkaSessionTimeoutMs).toBe(6000)
    expect(parseConfig(["--kafka-session-timeout-ms", "1000"], { GROVE_KAFKA_SESSION_TIMEOUT_MS: "6000" }).kafkaSessionTimeoutMs)
      .toBe(1000)
    expect(parseConfig(["--kafka-session-timeout-ms=1800000"], {}).kafkaSessionTimeoutMs).toBe(1_800_000)
    for (const bad of ["999", "1800001", "0", "-3000", "2500.5", "3s", "", "NaN"]) {
      expect(() => parseConfig(["--kafka-session-timeout-ms", bad], {}), bad).toThrow(/GROVE_KAFKA_SESSION_TIMEOUT_MS must be/)
    }
    expect(() => parseConfig([], { GROVE_KAFKA_SESSION_TIMEOUT_MS: "10 s" })).toThrow(ConfigError)
  })

  it("takes the drain deadline from a flag or the environment, 5 s by default, 0 to 10 min", () => {
    expect(parseConfig([], {}).drainTimeoutMs).toBe(5000)
    expect(parseConfig([], { GROVE_DRAIN_TIMEOUT_MS: "20000" }).drainTimeoutMs).toBe(20_000)
    expect(parseConfig(["--drain-timeout-ms", "0"], { GROVE_DRAIN_TIMEOUT_MS: "20000" }).drainTimeoutMs).toBe(0)
    for (const bad of ["-1", "600001", "2.5", "5s"]) {
      expect(() => parseConfig(["--drain-timeout-ms", bad], {}), bad).toThrow(/GROVE_DRAIN_TIMEOUT_MS must be/)
    }
  })

  it("rejects unknown flags, missing values and bad values", () => {
    expect(() => parseConfig(["--prot", "1"], {})).toThrow(/unknown option --prot/)
    expect(() => parseConfig(["--port"], {})).toThrow(/needs a value/)
    expect(() => parseConfig(["--port", "99999"], {})).toThrow(ConfigError)
    expect(() => parseConfig(["--mode", "swarm"], {})).toThrow(ConfigError)
    expect(() => parseConfig(["--kafka-prefix", "a b"], {})).toThrow(ConfigError)
    expect(() => parseConfig(["--command-timeout-ms", "0"], {})).toThrow(ConfigError)
  })
})
