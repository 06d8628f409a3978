/** A small history exercising every case the exporters handle; shared by their tests. */
import { randomBytes } from "node:crypto"
import { MemorySnapshotSource } from "./MemorySnapshotSource.ts"
import type { MemoryNode } from "./MemorySnapshotSource.ts"
import type { CommitRecord } from "./SnapshotSource.ts"

const MiB = 1024 * 1024

/** Deterministic bytes: a text-like half that deflates and a random half that does not. */
export const bigFile = (size: number): Uint8Array => {
  const out = new Uint8Array(size)
  const text = Buffer.from(Array.from({ length: 4096 }, (_, i) => `row ${i}: ${"grove ".repeat(i % 13)}\n`).join(""))
  for (let at = 0; at < size / 2; at += text.length) out.set(text.subarray(0, Math.min(text.length, size / 2 - at)), at)
  out.set(randomBytes(size - Math.floor(size / 2)), Math.floor(size / 2))
  return out
}

export interface TestHistory {
  readonly source: MemorySnapshotSource
  readonly history: ReadonlyArray<CommitRecord>
  /** Path -> file, for the newest commit. */
  readonly files: ReadonlyMap<string, { readonly content: Uint8Array; readonly mode: "regular" | "executable" | "symlink" }>
  readonly subjects: ReadonlyArray<string>
}

const flatten = (dir: Readonly<Record<string, MemoryNode>>, prefix = "", out = new Map<string, { content: Uint8Array; mode: "regular" | "executable" | "symlink" }>()) => {
  for (const [name, node] of Object.entries(dir)) {
    if ("dir" in node) flatten(node.dir, `${prefix}${name}/`, out)
    else out.set(`${prefix}${name}`, { content: typeof node.file === "string" ? Buffer.from(node.file) : node.file, mode: node.mode ?? "regular" })
  }
  return out
}

export const makeTestHistory = (): TestHistory => {
  const source = new MemorySnapshotSource(100_000)
  const src = { dir: { "main.ts": { file: "console.log('hi')\n" }, lib: { dir: { "util.ts": { file: "export const x = 1\n" } } } } }
  const v1: Record<string, MemoryNode> = {
    "README.md": { file: "# Hello\n" },
    src,
    bin: { dir: { "run.sh": { file: "#!/bin/sh\necho run\n", mode: "executable" } } },
    "empty.txt": { file: "" }
  }
  const v2: Record<string, MemoryNode> = {
    ...v1,
    "big.bin": { file: bigFile(12 * MiB) },
    link: { file: "src/main.ts", mode: "symlink" },
    "日本語": { dir: { "ファイル.txt": { file: "こんにちは\n" } } },
    "café.md": { file: "crème brûlée 🌳\n" },
    a: { dir: { b: { dir: { c: { dir: { "d.txt": { file: "deep\n" } } } } } } },
    // git sorts the directory `a` as "a/": after "a-b" and "a.txt"
    "a-b": { file: "dash\n" },
    "a.txt": { file: "dot\n" }
  }
  const v3: Record<string, MemoryNode> = { ...v2, "README.md": { file: "# Hello again\n" } }
  const trees = [v1, v2, v3].map((v) => source.addTree(v))
  const messages = ["Initial import", null, "Third commit\n\nWith a body."]
  const times = ["2026-06-24T00:00:00+00:00", "2026-06-25T12:30:00.123456+00:00", "2026-06-26T08:00:00+02:00"]
  const history: Array<CommitRecord> = []
  trees.forEach((tree, i) => {
    history.push({
      hash: `c${i}`.padEnd(64, "0"),
      parent_hash: i === 0 ? null : history[i - 1]!.hash,
      manifest_hash: tree,
      author: i === 1 ? "Zoë Writer" : "alice",
      message: messages[i] ?? null,
      timestamp: times[i]!
    })
  })
  return { source, history, files: flatten(v3), subjects: ["Third commit", "Squash commit", "Initial import"] }
}
