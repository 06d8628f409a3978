/**
 * How the broker's JVMs run: which `java`, which options, and a class-data-sharing archive.
 *
 * The archive (AppCDS, JDK 13+) holds Kafka's classes already parsed and verified. The
 * first broker to stop cleanly writes it; later JVMs (the storage format and the broker)
 * map it and start noticeably faster on a busy 2-core machine (about 0.3 s for the format
 * tool, 1 s or more for the broker, measured). It is keyed by the classpath and the JVM
 * binary. A stale or broken archive costs nothing: the JVM ignores it (-Xshare:auto).
 */
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import type { ServerExit } from "../process.ts"

const RESOURCES = import.meta.dirname

/*
 * A small, quick-starting JVM: the heap grows from 64 MiB up to 512 MiB only as needed; the
 * serial collector and C1-only compilation cost less memory and CPU than G1 and C2 on a
 * shared 2-core machine, and a test broker is never CPU-bound. No hsperfdata files; CDS
 * messages stay out of the broker's log.
 */
const BASE_OPTIONS = [
  "-Xms64m",
  "-Xmx512m",
  "-XX:+UseSerialGC",
  "-XX:TieredStopAtLevel=1",
  "-XX:-UsePerfData",
  "-XX:+ExitOnOutOfMemoryError",
  "-Xlog:cds=off",
  "-Xlog:cds+dynamic=off",
  "-Djava.awt.headless=true",
  `-Dlog4j2.configurationFile=${path.join(RESOURCES, "log4j2.xml")}`
]

/** `$JAVA_HOME/bin/java` when JAVA_HOME is set, else `java` from PATH. */
export const javaCommand = (): string => {
  const home = process.env["JAVA_HOME"]
  return home === undefined || home === "" ? "java" : path.join(home, "bin", "java")
}

const resolveBinary = (command: string): string | undefined => {
  const candidates = command.includes("/")
    ? [command]
    : (process.env["PATH"] ?? "").split(path.delimiter).map((dir) => path.join(dir, command))
  for (const candidate of candidates) {
    try {
      return fs.realpathSync(candidate)
    } catch {
      // Not here.
    }
  }
  return undefined
}

const cacheDir = () => path.join(process.env["XDG_CACHE_HOME"] ?? path.join(os.homedir(), ".cache"), "grove")

/** Where the class-data archive for this classpath and JVM lives (it may not exist yet). */
export const archiveFile = (classpath: string): string => {
  const binary = resolveBinary(javaCommand()) ?? javaCommand()
  let stamp = ""
  try {
    stamp = String(fs.statSync(binary).mtimeMs)
  } catch {
    // Unknown binary: the key still separates classpaths.
  }
  const key = createHash("sha256").update(`${classpath}\n${binary}\n${stamp}`).digest("hex").slice(0, 16)
  return path.join(cacheDir(), `kafka-cds-${key}.jsa`)
}

export interface BrokerRun {
  /** Extra options for this broker JVM (writing the archive at exit, the first time). */
  readonly options: ReadonlyArray<string>
  /** Call once this broker has ended: keeps a freshly written archive if the exit was clean. */
  readonly afterExit: (exit: ServerExit | undefined) => void
}

export interface JvmPlan {
  /** The options for every JVM of this start (format tool and broker). */
  readonly options: ReadonlyArray<string>
  /** What one broker launch adds. */
  readonly brokerRun: () => BrokerRun
}

/** JVM options for one broker start, using the class-data archive or arranging to write it. */
export const planJvm = (classpath: string, dataDir: string, extra: ReadonlyArray<string>): JvmPlan => {
  const archive = archiveFile(classpath)
  const common = [...BASE_OPTIONS, `-XX:ErrorFile=${path.join(dataDir, "hs_err_%p.log")}`]
  if (fs.existsSync(archive)) {
    return {
      options: [...common, `-XX:SharedArchiveFile=${archive}`, ...extra],
      brokerRun: () => ({ options: [], afterExit: () => {} })
    }
  }
  return {
    options: [...common, ...extra],
    brokerRun: () => {
      fs.mkdirSync(path.dirname(archive), { recursive: true })
      const pending = `${archive}.${process.pid}.${Date.now()}.tmp`
      return {
        options: [`-XX:ArchiveClassesAtExit=${pending}`],
        afterExit: (exit) => {
          // 143: the JVM's status after SIGTERM and its shutdown hooks; anything else may leave a torn file.
          const clean = exit !== undefined && exit.signal === null && (exit.code === 143 || exit.code === 0)
          try {
            if (clean && fs.statSync(pending).size > 0) fs.renameSync(pending, archive)
            else fs.rmSync(pending, { force: true })
          } catch {
            fs.rmSync(pending, { force: true })
          }
        }
      }
    }
  }
}
