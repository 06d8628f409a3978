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
import { type GroveServer, run, SERVER_BIN, startServer } from "./GroveServer.ts"

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

/** A user created with `grove-server user create` against the cluster's database; answers their key. */
export const createClusterUser = async (infra: ClusterInfra, name: string, options: { readonly admin?: boolean } = {}): Promise<string> => {
  const created = await run(SERVER_BIN, ["user", "create", name, ...(options.admin === true ? ["--admin"] : [])], { env: infra.env })
  if (created.code !== 0) throw new Error(`user create ${name} failed: ${created.stderr}`)
  return created.stdout.trim().split("\n").pop()!
}

export interface TwoNodes {
  readonly infra: ClusterInfra
  /** The key of the instance admin created before the nodes started. */
  readonly key: string
  readonly nodeA: GroveServer
  readonly nodeB: GroveServer
  /** Stops both nodes (one may be dead already) and the infrastructure. */
  readonly stop: () => Promise<void>
}

/** Fresh infrastructure, an instance admin named `admin`, then nodes `node-a` and `node-b`. */
export const startTwoNodes = async (admin: string, commandTimeoutMs: number, env: NodeJS.ProcessEnv = {}): Promise<TwoNodes> => {
  const infra = await startClusterInfra()
  const startNode = (name: string) =>
    startServer({ env: { ...infra.env, GROVE_COMMAND_TIMEOUT_MS: String(commandTimeoutMs), ...env }, args: ["--node-id", name] })
  let nodeA: GroveServer | undefined
  let nodeB: GroveServer | undefined
  let key: string
  try {
    key = await createClusterUser(infra, admin, { admin: true })
    nodeA = await startNode("node-a")
    nodeB = await startNode("node-b")
  } catch (error) {
    await nodeA?.stop()
    await infra.close()
    throw error
  }
  return {
    infra,
    key,
    nodeA,
    nodeB,
    stop: async () => {
      await nodeA.stop()
      await nodeB.stop()
      await infra.close()
    }
  }
}
