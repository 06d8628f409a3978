/**
 * Vitest globalSetup: one real Kafka broker for the whole test run (scripts/infra/kafka.ts).
 * Tests read its address with `inject("kafkaBootstrap")` ("127.0.0.1:<port>") and should use
 * their own topic and group names, since the broker is shared by every test file.
 *
 * With GROVE_KAFKA_BOOTSTRAP set (e.g. to a broker from `npm run infra:kafka`), that broker
 * is used instead and none is started.
 */
import { Cause, Effect, Exit, Option, Scope } from "effect"
import type { TestProject } from "vitest/node"
import { startKafka } from "../../scripts/infra/kafka.ts"

declare module "vitest" {
  export interface ProvidedContext {
    kafkaBootstrap: string
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const external = process.env["GROVE_KAFKA_BOOTSTRAP"]
  if (external !== undefined && external !== "") {
    project.provide("kafkaBootstrap", external)
    return async () => {}
  }
  const scope = Effect.runSync(Scope.make())
  const exit = await Effect.runPromiseExit(Scope.provide(startKafka(), scope))
  if (Exit.isFailure(exit)) {
    await Effect.runPromise(Scope.close(scope, exit))
    const error = Cause.findErrorOption(exit.cause)
    const detail = Option.isSome(error) ? `${error.value.message}\n${error.value.output}` : Cause.pretty(exit.cause)
    throw new Error(`could not start Kafka for the tests: ${detail}`)
  }
  project.provide("kafkaBootstrap", exit.value.bootstrap)
  return () => Effect.runPromise(Scope.close(scope, Exit.void))
}
