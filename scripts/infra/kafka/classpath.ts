/**
 * The broker's Java classpath, resolved by Maven from ./pom.xml.
 *
 * Maven keeps the jars in ~/.m2 (shared across runs and clean clones); the resolved
 * classpath is cached in ~/.cache/grove (or $XDG_CACHE_HOME/grove) under the pom's hash,
 * so once resolved a start does not run Maven at all. An edited pom, or a jar that has
 * gone from ~/.m2, resolves again.
 */
import { Effect } from "effect"
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { runCommand } from "../process.ts"
import { KafkaStartError } from "./errors.ts"

export const POM_FILE = path.join(import.meta.dirname, "pom.xml")

const cacheDir = () => path.join(process.env["XDG_CACHE_HOME"] ?? path.join(os.homedir(), ".cache"), "grove")

/** Where the classpath for the current pom is cached. */
export const classpathCacheFile = (): string => {
  const hash = createHash("sha256").update(fs.readFileSync(POM_FILE)).digest("hex").slice(0, 16)
  return path.join(cacheDir(), `kafka-classpath-${hash}.txt`)
}

const usable = (classpath: string) => {
  const entries = classpath.split(path.delimiter).filter((entry) => entry.length > 0)
  return entries.some((entry) => path.basename(entry).startsWith("kafka_2.13-")) && entries.every((entry) => fs.existsSync(entry))
}

const readCached = (file: string) => {
  try {
    const classpath = fs.readFileSync(file, "utf8").trim()
    return usable(classpath) ? classpath : undefined
  } catch {
    return undefined
  }
}

const resolveWithMaven = (cacheFile: string) =>
  Effect.gen(function*() {
    yield* Effect.logInfo("Resolving the Kafka broker's jars with Maven (first start only; cached afterwards)")
    fs.mkdirSync(path.dirname(cacheFile), { recursive: true })
    const output = `${cacheFile}.${process.pid}.tmp`
    yield* runCommand("mvn", [
      "-q",
      "-B",
      "-f",
      POM_FILE,
      "dependency:build-classpath",
      `-Dmdep.outputFile=${output}`,
      "-Dmdep.includeScope=runtime"
    ], { timeoutMs: 15 * 60_000 }).pipe(
      Effect.mapError((error) =>
        new KafkaStartError({
          message: `Maven could not resolve the Kafka jars (${error.message}); is mvn installed (scripts/setup/system-deps.sh) and Maven Central reachable?`,
          output: error.output
        })
      )
    )
    const classpath = fs.readFileSync(output, "utf8").trim()
    if (!usable(classpath)) {
      fs.rmSync(output, { force: true })
      return yield* new KafkaStartError({ message: "Maven returned an unusable Kafka classpath", output: classpath })
    }
    // Atomic, so a concurrent start never reads half a file.
    fs.renameSync(output, cacheFile)
    return classpath
  })

/** The broker's classpath: from the cache when it is still valid, otherwise from Maven. */
export const kafkaClasspath: Effect.Effect<string, KafkaStartError> = Effect.suspend(() => {
  const cacheFile = classpathCacheFile()
  const cached = readCached(cacheFile)
  return cached === undefined ? resolveWithMaven(cacheFile) : Effect.succeed(cached)
})
