/**
 * Reviewing branches, as `gh pr` and `tea pr` users expect: `grove branch list` (what waits for review,
 * with CI and whether each merges cleanly), `grove branch show NAME` (description, commits, files
 * changed) and `grove diff BRANCH` (a unified diff against the merge base with main). All read
 * `GET …/branches/{branch}/merge-preview`, which plans the merge without writing anything. The
 * repository is `--repo OWNER/NAME`, else the checkout's.
 */
import type { ApiSync, MergePreview } from "@grove/api"
import { Effect, Option } from "effect"
import * as fs from "node:fs/promises"
import * as os from "node:os"
import * as path from "node:path"
import { CliEnv } from "../CliEnv.ts"
import { diffText, fileDiff, wantsColor } from "../DiffText.ts"
import { Output, table } from "../Output.ts"
import { fetchBlobBytes } from "../sync/Download.ts"
import { type RemoteRepo, transfer } from "../sync/RemoteRepo.ts"
import { checkName } from "./Branch.ts"
import { target } from "./Ci.ts"

type Status = "open" | "closed" | "merged"

const short = (hash: string | null | undefined) => hash === null || hash === undefined ? "-" : hash.slice(0, 12)
const firstLine = (text: string | null | undefined) => (text ?? "").split("\n")[0]!

const preview = (repo: RemoteRepo, branch: string) =>
  repo.connection.call(repo.connection.client.merges.preview({ params: { owner: repo.owner, name: repo.name, branch } }))

const mergeText = (p: MergePreview) =>
  p.merge === "conflicts" ? `conflicts (${p.conflict_paths.length})` : p.merge === "no_changes" ? "no changes" : p.merge === "not_mergeable" ? "no" : "clean"

export const list = Effect.fn("Review.list")(function*(remote: string, input: { readonly status: Option.Option<Status>; readonly repo: Option.Option<string> }) {
  const out = yield* Output
  const repo = yield* target(remote, input.repo)
  const status = Option.getOrElse(input.status, () => "open" as const)
  const { call, client } = repo.connection
  const listed = yield* call(client.branches.list({ params: { owner: repo.owner, name: repo.name }, query: { status } }))
  const branches = listed.branches.filter((b) => b.name !== "main")
  // CI and mergeability matter for what is still open; a closed or merged branch has neither.
  const rows = yield* Effect.forEach(branches, (b) =>
    b.state === "open" && b.head !== null
      ? Effect.map(preview(repo, b.name), (p) => ({ b, p: Option.some(p) }))
      : Effect.succeed({ b, p: Option.none<MergePreview>() }), { concurrency: 4 })
  const json = rows.map(({ b, p }) => ({
    name: b.name,
    description: b.description,
    author: b.created_by,
    head: b.head,
    state: b.state,
    updated_at: b.updated_at,
    ci: Option.match(p, { onNone: () => null, onSome: (x) => x.ci.state }),
    merge: Option.match(p, { onNone: () => null, onSome: (x) => x.merge }),
    conflict_paths: Option.match(p, { onNone: () => [], onSome: (x) => x.conflict_paths })
  }))
  yield* out.result({ repository: `${repo.owner}/${repo.name}`, branches: json }, () =>
    rows.length === 0
      ? `No ${status} branches in ${repo.owner}/${repo.name}.`
      : table(
        ["BRANCH", "AUTHOR", "UPDATED", "CI", "MERGE", "HEAD", "DESCRIPTION"],
        rows.map(({ b, p }) => [
          b.name,
          b.created_by,
          b.updated_at,
          Option.match(p, { onNone: () => "-", onSome: (x) => x.ci.state }),
          Option.match(p, { onNone: () => b.state, onSome: mergeText }),
          short(b.head),
          firstLine(b.description)
        ])
      ))
})

const changeLetter: Record<string, string> = { added: "A", modified: "M", deleted: "D", renamed: "R" }
const fileLine = (f: ApiSync.FileChangeData) => `${changeLetter[f.change_type] ?? "?"} ${f.old_path == null ? "" : `${f.old_path} -> `}${f.path}`

export const show = Effect.fn("Review.show")(function*(remote: string, input: { readonly name: string; readonly repo: Option.Option<string> }) {
  const out = yield* Output
  yield* checkName(input.name)
  const repo = yield* target(remote, input.repo)
  const { call, client } = repo.connection
  const branch = yield* call(client.branches.get({ params: { owner: repo.owner, name: repo.name, branch: input.name }, query: {} }))
  const p = yield* preview(repo, input.name)
  yield* out.result({ ...branch, preview: p }, () =>
    [
      `${branch.name} (${branch.state}) by ${branch.created_by}, updated ${branch.updated_at}`,
      ...(branch.description === null || branch.description === "" ? ["(no description: grove desc TEXT sets it)"] : ["", ...branch.description.split("\n").map((l) => `    ${l}`), ""]),
      `Head:   ${short(p.head)}   merge base with main: ${short(p.merge_base)}   main: ${short(p.main_head)}`,
      `CI:     ${p.ci.state}${p.ci.workflows.length === 0 ? "" : ` (${p.ci.workflows.join(", ")})`}`,
      `Merge:  ${mergeText(p)}${p.reason === undefined ? "" : `: ${p.reason}`}`,
      ...p.conflict_paths.map((c) => `          ${c}`),
      "",
      `Commits (${p.commits.length}):`,
      ...p.commits.map((c) => `  ${short(c.hash)}  ${c.timestamp}  ${c.author}  ${firstLine(c.message) || `(${c.files} file(s))`}`),
      "",
      `Files changed (${p.files.length}):`,
      ...p.files.map((f) => `  ${fileLine(f)}`)
    ].join("\n"))
})

export const diff = Effect.fn("Review.diff")(function*(remote: string, input: { readonly branch: string; readonly repo: Option.Option<string>; readonly color: boolean }) {
  const out = yield* Output
  const { env } = yield* CliEnv
  yield* checkName(input.branch)
  const repo = yield* target(remote, input.repo)
  const p = yield* preview(repo, input.branch)
  const hashes = new Set(p.files.flatMap((f) => [f.old_blob_hash, f.new_blob_hash]).filter((h): h is string => h != null))
  const dir = yield* transfer("cannot make a temporary directory", () => fs.mkdtemp(path.join(os.tmpdir(), "grove-diff-")))
  const blobs = hashes.size === 0
    ? new Map<string, Uint8Array>()
    : yield* fetchBlobBytes(repo, [...hashes].map((hash) => ({ hash, size: 1 })), dir).pipe(
      Effect.ensuring(Effect.promise(() => fs.rm(dir, { recursive: true, force: true })))
    )
  const bytes = (hash: string | null | undefined) => hash == null ? new Uint8Array(0) : blobs.get(hash) ?? new Uint8Array(0)
  const files = p.files.map((f) => fileDiff(f, bytes(f.old_blob_hash), bytes(f.new_blob_hash)))
  yield* out.result({ branch: p.branch, head: p.head, merge_base: p.merge_base, files }, () =>
    files.length === 0 ? `${p.branch} changes nothing since its merge base with main.` : diffText(files, wantsColor(input.color, env)))
})
