/** The environment a `grove-server` node needs to join a Kafka broker, PostgreSQL and an S3 server. */
import { randomBytes } from "node:crypto"
import type { KafkaBroker } from "./kafka.ts"
import type { PostgresServer } from "./postgres.ts"
import type { S3Server } from "./s3.ts"

/** One key per process that starts nodes: every node of a cluster must encrypt CI secrets alike. */
const secretKey = randomBytes(32).toString("base64")

export const clusterEnv = (kafka: Pick<KafkaBroker, "bootstrap">, pg: Pick<PostgresServer, "url">, s3: S3Server) => ({
  GROVE_MODE: "cluster",
  GROVE_KAFKA_BROKERS: kafka.bootstrap,
  GROVE_DATABASE_URL: pg.url,
  GROVE_S3_ENDPOINT: s3.endpoint,
  GROVE_S3_REGION: s3.region,
  GROVE_S3_BUCKET: s3.bucket,
  GROVE_S3_ACCESS_KEY_ID: s3.accessKeyId,
  GROVE_S3_SECRET_ACCESS_KEY: s3.secretAccessKey,
  GROVE_SECRET_KEY: secretKey
})

/** `value` as one shell word. */
const shellWord = (value: string) => /^[\w@%+=:,./-]+$/.test(value) ? value : `'${value.replaceAll("'", "'\\''")}'`

/**
 * The `grove-server user create` command line for a cluster's environment, to paste in a shell in the
 * checkout: every variable a node needs (the secret key included), so it works as printed.
 */
export const userCreateCommand = (env: Readonly<Record<string, string>>, name: string) =>
  `${Object.entries(env).map(([key, value]) => `${key}=${shellWord(value)}`).join(" ")} npx grove-server user create ${name} --admin`
