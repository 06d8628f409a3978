/**
 * Cluster-mode infrastructure for end-to-end suites: a Kafka broker, a private
 * PostgreSQL and an S3 server of the suite's own (so suites running at the same
 * time never share topics or consumer groups), and the environment a
 * `grove-server` node needs to join them.
 */
import { Effect, Exit, Scope } from "effect"
import { clusterEnv } from "../../scripts/infra/clusterEnv.ts"
import { startKafka } from "../../scripts/infra/kafka.ts"
import { startPostgres } from "../../scripts/infra/postgres.ts"
import { startS3 } from "../../scripts/infra/s3.ts"

export interface ClusterInfra {
  readonly env: NodeJS.ProcessEnv
  readonly databaseUrl: string
  readonly kafkaBootstrap: string
  readonly close: () => Promise<void>
}

export const startClusterInfra = async (): Promise<ClusterInfra> => {
  const scope = Effect.runSync(Scope.make())
  const [kafka, pg, s3] = await Effect.runPromise(
    Scope.provide(Effect.all([startKafka(), startPostgres(), startS3()], { concurrency: "unbounded" }), scope)
  )
  const kafkaBootstrap = kafka.bootstrap
  return {
    databaseUrl: pg.url,
    kafkaBootstrap,
    env: clusterEnv(kafka, pg, s3),
    close: () => Effect.runPromise(Scope.close(scope, Exit.void))
  }
}
