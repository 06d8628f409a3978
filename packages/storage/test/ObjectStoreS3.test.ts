import { ListMultipartUploadsCommand, S3Client } from "@aws-sdk/client-s3"
import { assert } from "@effect/vitest"
import { Context, Effect, Layer, Stream } from "effect"
import { randomBytes } from "node:crypto"
import { type S3Server, startS3 } from "../../../scripts/infra/s3.ts"
import { ObjectStore } from "../src/ObjectStore.ts"
import * as ObjectStoreS3 from "../src/ObjectStoreS3.ts"
import { Boom, keyFor, objectStoreContract } from "./ObjectStore.contract.ts"

class Server extends Context.Service<Server, S3Server>()("test/ObjectStoreS3/Server") {}

const TestLayer = Layer.unwrap(Effect.gen(function*() {
  const server = yield* startS3()
  return Layer.merge(ObjectStoreS3.layer(server), Layer.succeed(Server, server))
}))

// On a clean machine the first run builds MinIO (a few minutes); later runs use the cached binary.
objectStoreContract("S3 (MinIO)", TestLayer, { timeout: 600_000 }, (it) => {
  it.effect("aborts the multipart upload of a failed put", () =>
    Effect.gen(function*() {
      const store = yield* ObjectStore
      const server = yield* Server
      const body = Stream.concat(
        Stream.fromIterable(Array.from({ length: 10 }, () => randomBytes(1024 * 1024))),
        Stream.fail(new Boom({ message: "upstream" }))
      )
      yield* Effect.flip(store.put(keyFor(randomBytes(8), "aborts"), body))
      const client = new S3Client({ endpoint: server.endpoint, region: server.region, forcePathStyle: true, credentials: server })
      const uploads = yield* Effect.promise(() =>
        client.send(new ListMultipartUploadsCommand({ Bucket: server.bucket, Prefix: "aborts/" }))
      ).pipe(Effect.ensuring(Effect.sync(() => client.destroy())))
      assert.deepStrictEqual(uploads.Uploads ?? [], [])
    }))

  it.effect("rejects wrong credentials (the server verifies signatures)", () =>
    Effect.gen(function*() {
      const server = yield* Server
      const wrong = yield* ObjectStoreS3.make({ ...server, secretAccessKey: "not-the-secret" })
      const error = yield* Effect.flip(wrong.has(keyFor(randomBytes(8))))
      assert.strictEqual(error.reason, "Backend")
    }))
})
