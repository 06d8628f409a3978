/**
 * Rewrites a bundle's imports of Node's own modules (`import * as fs from "node:fs"`) into
 * `const fs = process.getBuiltinModule("node:fs")` at the top of the file. An ES import makes Node build the
 * module's ES facade, which reads every export, lazy getters too: node:fs's `promises` and stream classes load
 * fs/promises (and readline with it) and the streams, node:crypto's `webcrypto` its whole Web Crypto. The getter
 * returns the CommonJS object and nothing more is read until used. (An esbuild plugin that turns each builtin into a
 * CommonJS module does the same, but esbuild then puts each one in a chunk of its own: more files to load.)
 *
 * Import declarations are hoisted, so the constants at the top hold what the imports held; builtins never change.
 * esbuild prints these imports in a few fixed shapes; a file whose imports do not all match, counted against
 * esbuild's metafile, is left as it was (it still works, only slower) and named in a warning.
 */
import type { Metafile } from "esbuild"
import * as fs from "node:fs"
import { builtinModules } from "node:module"
import * as path from "node:path"

const builtins = new Set(builtinModules)
const isBuiltin = (specifier: string) => specifier.startsWith("node:") || builtins.has(specifier)

// One per line as esbuild prints them, or one after another on a line when it minifies (`import*as u from"node:net";`).
const IMPORT = /^import\s+([^;'"]*?)\s+from\s*"([a-z_:/]+)";?[ \t]*$|(?<=^|;)import\s*([^;'"()]*?)\s*from\s*"([a-z_:/]+)";?/gm
const NAME = /^[A-Za-z_$][\w$]*$/

/** `{ a, b as c }` as a destructuring pattern `{ a, b: c }`; undefined when it is not that shape. */
const pattern = (names: string): string | undefined => {
  const parts = names.slice(1, -1).split(",").map((p) => p.trim()).filter((p) => p !== "")
  const out: Array<string> = []
  for (const part of parts) {
    const [name, alias, ...rest] = part.split(/\s+as\s+/)
    if (rest.length > 0 || !NAME.test(name!) || (alias !== undefined && !NAME.test(alias))) return undefined
    out.push(alias === undefined ? name! : `${name}: ${alias}`)
  }
  return `{ ${out.join(", ")} }`
}

/** The constants for one import clause (`* as x`, `{ ... }`, `x`, `x, * as y`, `x, { ... }`). */
const constantsFor = (clause: string, specifier: string): Array<string> | undefined => {
  const getter = `process.getBuiltinModule(${JSON.stringify(specifier)})`
  const comma = clause.startsWith("{") ? -1 : clause.indexOf(",")
  const [first, second] = comma < 0 ? [clause, undefined] : [clause.slice(0, comma).trim(), clause.slice(comma + 1).trim()]
  const one = (part: string, isDefault: boolean): string | undefined => {
    if (part.startsWith("* as ")) return NAME.test(part.slice(5).trim()) ? `const ${part.slice(5).trim()} = ${getter};` : undefined
    if (part.startsWith("{") && part.endsWith("}")) {
      const p = pattern(part)
      return p === undefined ? undefined : `const ${p} = ${getter};`
    }
    // A default import of a builtin is its CommonJS object.
    return isDefault && NAME.test(part) ? `const ${part} = ${getter};` : undefined
  }
  const lines = [one(first!, true), ...(second === undefined ? [] : [one(second, false)])]
  return lines.every((l) => l !== undefined) ? lines as Array<string> : undefined
}

/**
 * `text` with its builtin imports as constants after the first line (the banner: its own import of node:module,
 * which esbuild does not count, stays); undefined when unsure.
 */
export const rewriteBuiltinImports = (text: string, expected: number): string | undefined => {
  const constants: Array<string> = []
  let found = 0
  let unsure = false
  const firstLine = text.indexOf("\n") + 1
  const body = text.slice(firstLine).replace(IMPORT, (statement, ...groups: Array<string | undefined>) => {
    const [clause, specifier] = groups[0] !== undefined ? [groups[0], groups[1]!] : [groups[2]!, groups[3]!]
    if (!isBuiltin(specifier)) return statement
    found++
    const lines = constantsFor(clause.replace(/^\*\s*as\s+/, "* as ").replace(/\s+/g, " ").trim(), specifier)
    if (lines === undefined) {
      unsure = true
      return statement
    }
    constants.push(...lines)
    return ""
  })
  if (unsure || found !== expected) return undefined
  if (found === 0) return text
  return `${text.slice(0, firstLine)}${constants.join("\n")}\n${body}`
}

/** Rewrites every output of a build made with `metafile: true` (paths in it are relative to `cwd`). */
export const rewriteBundleBuiltins = (metafile: Metafile, cwd: string): ReadonlyArray<string> => {
  const leftAsBuilt: Array<string> = []
  for (const [file, output] of Object.entries(metafile.outputs)) {
    if (!file.endsWith(".mjs")) continue
    const expected = output.imports.filter((i) => i.external && i.kind === "import-statement" && isBuiltin(i.path)).length
    const absolute = path.resolve(cwd, file)
    const rewritten = rewriteBuiltinImports(fs.readFileSync(absolute, "utf8"), expected)
    if (rewritten === undefined) leftAsBuilt.push(file)
    else fs.writeFileSync(absolute, rewritten)
  }
  return leftAsBuilt
}
