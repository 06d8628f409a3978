import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["packages/*/src/**/*.test.ts", "packages/*/test/**/*.test.ts", "test/**/*.test.ts"],
    // One real Kafka broker for the whole run (cluster-mode suites use it via inject("kafkaBootstrap")).
    globalSetup: ["test/setup/kafka.global.ts"],
    testTimeout: 60_000,
    hookTimeout: 600_000,
    pool: "forks",
    // Two cores: suites that start servers run two at a time at most.
    maxWorkers: 2
  }
})
