/**
 * Copies Grove's object store (cluster mode: one S3 bucket) to a directory and back, for
 * scripts/ops/backup.sh and restore.sh. Objects are immutable and content-addressed
 * (`<namespace>/<hash>`), so a download skips what the directory already holds at the same size
 * (an incremental backup into the same directory copies only new objects), and a file appears
 * under its final name only once it is complete.
 *
 *   node scripts/ops/objects.ts download DIR            bucket -> DIR/<namespace>/<hash>
 *   node scripts/ops/objects.ts upload DIR [--into-nonempty]
 *                                                       DIR -> bucket (refuses a bucket that has objects)
 *
 * The bucket is the nodes' own settings: GROVE_S3_ENDPOINT, GROVE_S3_REGION, GROVE_S3_BUCKET,
 * GROVE_S3_ACCESS_KEY_ID, GROVE_S3_SECRET_ACCESS_KEY. Any S3 tool that copies a bucket (aws s3 sync,
 * rclone, mc mirror) does the same job; this one needs only the SDK the server already ships.
 */
import { GetObjectCommand, ListObjectsV2Command, PutObjectCommand, S3Client } from "@aws-sdk/client-s3"
import { createReadStream, createWriteStream } from "node:fs"
import * as fs from "node:fs/promises"
import * as path from "node:path"
import { Readable } from "node:stream"
import { pipeline } from "node:stream/promises"

/** A Grove object key (ObjectStore's NAMESPACE_PATTERN and HASH_PATTERN): also a safe relative path. */
const KEY = /^[a-z0-9][a-z0-9_-]{0,63}\/[0-9a-f]{64}$/
const CONCURRENCY = 8

const setting = (name: string): string => {
  const value = process.env[name]
  if (value === undefined || value === "") throw new Error(`${name} is not set (the nodes' S3 settings are needed)`)
  return value
}

const connect = () => {
  const client = new S3Client({
    endpoint: setting("GROVE_S3_ENDPOINT"),
    region: process.env.GROVE_S3_REGION ?? "us-east-1",
    forcePathStyle: true,
    credentials: { accessKeyId: setting("GROVE_S3_ACCESS_KEY_ID"), secretAccessKey: setting("GROVE_S3_SECRET_ACCESS_KEY") }
  })
  return { client, bucket: setting("GROVE_S3_BUCKET") }
}

/** Every object of the bucket, a listing page (1,000) at a time. */
async function* listBucket(client: S3Client, bucket: string): AsyncGenerator<{ key: string; size: number }> {
  let token: string | undefined
  do {
    const page = await client.send(new ListObjectsV2Command({ Bucket: bucket, ContinuationToken: token }))
    for (const item of page.Contents ?? []) yield { key: item.Key ?? "", size: item.Size ?? 0 }
    token = page.IsTruncated === true ? page.NextContinuationToken : undefined
  } while (token !== undefined)
}

/** Every file under `root`, as a key relative to it. */
async function* listDir(root: string, dir = ""): AsyncGenerator<{ key: string; size: number }> {
  for (const entry of await fs.readdir(path.join(root, dir), { withFileTypes: true })) {
    const key = dir === "" ? entry.name : `${dir}/${entry.name}`
    if (entry.isDirectory()) yield* listDir(root, key)
    else if (entry.isFile()) yield { key, size: (await fs.stat(path.join(root, key))).size }
  }
}

/** Runs `work` on each item, `CONCURRENCY` at a time, never holding more than that many items. */
const forEachLimited = async <A>(items: AsyncIterable<A>, work: (item: A) => Promise<void>) => {
  const running = new Set<Promise<void>>()
  let failure: unknown
  for await (const item of items) {
    if (failure !== undefined) break
    const task = work(item).catch((error: unknown) => void (failure ??= error)).finally(() => running.delete(task))
    running.add(task)
    if (running.size >= CONCURRENCY) await Promise.race(running)
  }
  await Promise.all(running)
  if (failure !== undefined) throw failure
}

const download = async (dir: string) => {
  const { client, bucket } = connect()
  let copied = 0
  let kept = 0
  let bytes = 0
  await forEachLimited(listBucket(client, bucket), async ({ key, size }) => {
    if (!KEY.test(key)) return void process.stderr.write(`objects: skipping ${JSON.stringify(key)}: not a Grove object key\n`)
    const file = path.join(dir, key)
    const existing = await fs.stat(file).catch(() => undefined)
    if (existing?.size === size) return void kept++
    await fs.mkdir(path.dirname(file), { recursive: true })
    const response = await client.send(new GetObjectCommand({ Bucket: bucket, Key: key }))
    const partial = `${file}.partial`
    await pipeline(response.Body as Readable, createWriteStream(partial))
    await fs.rename(partial, file)
    copied++
    bytes += size
  })
  client.destroy()
  process.stdout.write(`objects: ${copied} copied (${bytes} bytes), ${kept} already in ${dir}\n`)
}

const upload = async (dir: string, intoNonEmpty: boolean) => {
  const { client, bucket } = connect()
  if (!intoNonEmpty) {
    const first = await client.send(new ListObjectsV2Command({ Bucket: bucket, MaxKeys: 1 }))
    if ((first.KeyCount ?? 0) > 0) {
      throw new Error(`the bucket ${bucket} is not empty: restore into an empty one (or pass --into-nonempty)`)
    }
  }
  let copied = 0
  let bytes = 0
  await forEachLimited(listDir(dir), async ({ key, size }) => {
    if (!KEY.test(key)) return void process.stderr.write(`objects: skipping ${JSON.stringify(key)}: not a Grove object key\n`)
    await client.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: createReadStream(path.join(dir, key)), ContentLength: size }))
    copied++
    bytes += size
  })
  client.destroy()
  process.stdout.write(`objects: ${copied} restored (${bytes} bytes) into ${bucket}\n`)
}

const [command, dir, ...flags] = process.argv.slice(2)
const main = async () => {
  if (dir === undefined || (command !== "download" && command !== "upload")) {
    throw new Error("usage: node scripts/ops/objects.ts download|upload DIR [--into-nonempty]")
  }
  if (command === "download") await download(path.resolve(dir))
  else await upload(path.resolve(dir), flags.includes("--into-nonempty"))
}
main().catch((error: unknown) => {
  process.stderr.write(`objects: ${error instanceof Error ? error.message : String(error)}\n`)
  process.exit(1)
})
