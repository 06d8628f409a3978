/**
 * gitignore-style globs for `.oak/PERMISSIONS`, matched against repository-relative file paths
 * (`/`-separated, no leading slash). The semantics are git's (gitignore(5), wildmatch with
 * WM_PATHNAME), checked against `git check-ignore --no-index`:
 *
 * - `*` matches any run of characters within one path segment, `?` one character, `[...]` one
 *   character of a class: ranges `a-z`, negation `[!..]` or `[^..]`, `]` first is literal, `\`
 *   escapes, POSIX classes `[[:alpha:]]` (ASCII, as git). None of them ever matches `/`. One
 *   character is one Unicode code point (git counts bytes, so its `?` never matches `é`): the one
 *   deliberate difference from git. (GitHub's CODEOWNERS has no classes at all; gitignore does.)
 * - `**` as a whole segment matches any number of segments: `**\/x` (x at any depth), `a/**`
 *   (everything inside a), `a/**\/b` (b at any depth under a, including `a/b`). Stars that are not
 *   a whole segment (`a**b`) are ordinary stars.
 * - A leading `/` anchors the pattern to the root; so does a `/` in the middle. A pattern without a
 *   slash (a trailing one aside) matches a name at any depth.
 * - A trailing `/` matches only a directory: the pattern covers the files under that directory.
 * - A pattern that matches a directory covers everything under it (git ignores a directory's
 *   contents with it). So `docs/*` covers `docs/a/b.md` too: this is gitignore's answer and differs
 *   from GitHub's CODEOWNERS, where `docs/*` covers only direct children. For a permissions file it
 *   is the safe reading: a rule restricting `secret/*` also restricts `secret/deep/key.pem`.
 * - `\` escapes the next character (`\*`, `\ `, `\#`, `\!`). Matching is case-sensitive, with no
 *   Unicode normalization.
 *
 * Matching is done segment by segment with the linear greedy-star algorithm, never with a
 * backtracking regular expression, so a hostile pattern cannot make a match slow.
 */

type CharToken =
  | { readonly t: "lit"; readonly c: number }
  | { readonly t: "any" }
  | { readonly t: "star" }
  | { readonly t: "class"; readonly negated: boolean; readonly ranges: ReadonlyArray<readonly [number, number]> }

/** One path segment's pattern: a literal name (fast path), `*` (any one segment), or tokens. */
type Segment =
  | { readonly kind: "literal"; readonly name: string }
  | { readonly kind: "anyName" }
  | { readonly kind: "tokens"; readonly tokens: ReadonlyArray<CharToken> }
  | { readonly kind: "doubleStar" }

export interface Glob {
  /** The pattern as written. */
  readonly pattern: string
  /** Matches relative to the root only (leading or inner `/`). */
  readonly anchored: boolean
  /** Had a trailing `/`: matches directories only, hence only the files under them. */
  readonly directoryOnly: boolean
  /** The full segment program: unanchored patterns start with `**`; the tail covers a directory's contents. */
  readonly segments: ReadonlyArray<Segment>
}

export type GlobResult = { readonly ok: true; readonly glob: Glob } | { readonly ok: false; readonly reason: string }

const fail = (reason: string): GlobResult => ({ ok: false, reason })

const POSIX_CLASSES: Record<string, ReadonlyArray<readonly [number, number]>> = {
  alnum: [[0x30, 0x39], [0x41, 0x5a], [0x61, 0x7a]],
  alpha: [[0x41, 0x5a], [0x61, 0x7a]],
  blank: [[0x20, 0x20], [0x09, 0x09]],
  cntrl: [[0x00, 0x1f], [0x7f, 0x7f]],
  digit: [[0x30, 0x39]],
  graph: [[0x21, 0x7e]],
  lower: [[0x61, 0x7a]],
  print: [[0x20, 0x7e]],
  punct: [[0x21, 0x2f], [0x3a, 0x40], [0x5b, 0x60], [0x7b, 0x7e]],
  space: [[0x09, 0x0d], [0x20, 0x20]],
  upper: [[0x41, 0x5a]],
  xdigit: [[0x30, 0x39], [0x41, 0x46], [0x61, 0x66]]
}

const SLASH = 0x2f
const show = (cp: number): string => String.fromCodePoint(cp)

type Lexed = { readonly t: "slash" } | CharToken

/** Splits the pattern into characters, wildcards, classes and slashes, resolving escapes. */
const lex = (pattern: string): { ok: true; tokens: Array<Lexed> } | { ok: false; reason: string } => {
  const cps = Array.from(pattern, (ch) => ch.codePointAt(0) ?? 0)
  const tokens: Array<Lexed> = []
  let i = 0
  while (i < cps.length) {
    const c = cps[i]!
    if (c === 0x5c /* \ */) {
      const next = cps[i + 1]
      if (next === undefined) return { ok: false, reason: "ends with an unescaped '\\'" }
      tokens.push(next === SLASH ? { t: "slash" } : { t: "lit", c: next })
      i += 2
    } else if (c === SLASH) {
      tokens.push({ t: "slash" })
      i++
    } else if (c === 0x2a /* * */) {
      tokens.push({ t: "star" })
      i++
    } else if (c === 0x3f /* ? */) {
      tokens.push({ t: "any" })
      i++
    } else if (c === 0x5b /* [ */) {
      const parsed = lexClass(cps, i)
      if (!parsed.ok) return parsed
      tokens.push(parsed.token)
      i = parsed.end
    } else {
      tokens.push({ t: "lit", c })
      i++
    }
  }
  return { ok: true, tokens }
}

/** A class starting at `cps[start] === '['`; git's wildmatch rules. */
const lexClass = (
  cps: ReadonlyArray<number>,
  start: number
): { ok: true; token: CharToken; end: number } | { ok: false; reason: string } => {
  let i = start + 1
  let negated = false
  if (cps[i] === 0x21 /* ! */ || cps[i] === 0x5e /* ^ */) {
    negated = true
    i++
  }
  const ranges: Array<readonly [number, number]> = []
  let first = true
  for (;;) {
    const c = cps[i]
    if (c === undefined) return { ok: false, reason: "has an unterminated character class '['" }
    if (c === 0x5d /* ] */ && !first) return { ok: true, token: { t: "class", negated, ranges }, end: i + 1 }
    first = false
    if (c === 0x5b /* [ */ && cps[i + 1] === 0x3a /* : */) {
      const close = findPosixEnd(cps, i + 2)
      if (close !== -1) {
        const name = String.fromCodePoint(...cps.slice(i + 2, close))
        const posix = POSIX_CLASSES[name]
        if (posix === undefined) return { ok: false, reason: `has an unknown character class '[:${name}:]'` }
        ranges.push(...posix)
        i = close + 2
        continue
      }
    }
    let lo = c
    if (c === 0x5c /* \ */) {
      const next = cps[i + 1]
      if (next === undefined) return { ok: false, reason: "ends with an unescaped '\\'" }
      lo = next
      i++
    }
    i++
    if (cps[i] === 0x2d /* - */ && cps[i + 1] !== undefined && cps[i + 1] !== 0x5d) {
      let hi = cps[i + 1]!
      i += 2
      if (hi === 0x5c) {
        const next = cps[i]
        if (next === undefined) return { ok: false, reason: "ends with an unescaped '\\'" }
        hi = next
        i++
      }
      if (hi < lo) return { ok: false, reason: `has a reversed range '${show(lo)}-${show(hi)}'` }
      ranges.push([lo, hi])
    } else {
      ranges.push([lo, lo])
    }
  }
}

const findPosixEnd = (cps: ReadonlyArray<number>, from: number): number => {
  for (let j = from; j + 1 < cps.length; j++) {
    if (cps[j] === 0x3a && cps[j + 1] === 0x5d) return j
    if (cps[j] === 0x5d) return -1
  }
  return -1
}

const DOUBLE: Segment = { kind: "doubleStar" }
const ANY_NAME: Segment = { kind: "anyName" }

const toSegment = (tokens: ReadonlyArray<CharToken>): Segment => {
  if (tokens.length === 2 && tokens[0]!.t === "star" && tokens[1]!.t === "star") return DOUBLE
  // Consecutive stars inside a segment are one star.
  const collapsed: Array<CharToken> = []
  for (const token of tokens) {
    if (token.t === "star" && collapsed.at(-1)?.t === "star") continue
    collapsed.push(token)
  }
  if (collapsed.length === 1 && collapsed[0]!.t === "star") return ANY_NAME
  if (collapsed.every((token) => token.t === "lit")) {
    return { kind: "literal", name: String.fromCodePoint(...collapsed.map((token) => (token as { c: number }).c)) }
  }
  return { kind: "tokens", tokens: collapsed }
}

/** Compiles one pattern as written in the file (escapes included). */
export const compileGlob = (pattern: string): GlobResult => {
  if (pattern.length === 0) return fail("is empty")
  const lexed = lex(pattern)
  if (!lexed.ok) return fail(lexed.reason)
  const tokens = lexed.tokens
  let anchored = false
  let directoryOnly = false
  if (tokens[0]?.t === "slash") {
    anchored = true
    tokens.shift()
  }
  if (tokens.at(-1)?.t === "slash") {
    directoryOnly = true
    tokens.pop()
  }
  if (tokens.length === 0) return fail("names no file or directory")
  const raw: Array<Array<CharToken>> = [[]]
  for (const token of tokens) {
    if (token.t === "slash") raw.push([])
    else raw.at(-1)!.push(token)
  }
  if (raw.length > 1) anchored = true
  const segments: Array<Segment> = []
  for (const segmentTokens of raw) {
    if (segmentTokens.length === 0) return fail("has an empty path segment ('//')")
    const segment = toSegment(segmentTokens)
    if (segment.kind === "literal" && (segment.name === "." || segment.name === "..")) {
      return fail(`has a '${segment.name}' segment, which never matches a path`)
    }
    if (segment.kind === "doubleStar" && segments.at(-1)?.kind === "doubleStar") continue
    segments.push(segment)
  }
  // Unanchored: at any depth. Then: the path itself or anything under it; for a directory, only under it.
  const program: Array<Segment> = []
  if (!anchored && segments[0]?.kind !== "doubleStar") program.push(DOUBLE)
  program.push(...segments)
  // A trailing `**` matches everything inside, not the directory itself: one segment or more.
  if (program.at(-1)?.kind === "doubleStar") program.splice(-1, 1, ANY_NAME, DOUBLE)
  if (directoryOnly) program.push(ANY_NAME)
  if (program.at(-1)?.kind !== "doubleStar") program.push(DOUBLE)
  return { ok: true, glob: { pattern, anchored, directoryOnly, segments: program } }
}

/** A path split once into segments (and code points), to test against many globs. */
export interface PreparedPath {
  readonly path: string
  readonly names: ReadonlyArray<string>
  readonly codePoints: ReadonlyArray<ReadonlyArray<number>>
}

/** Repository-relative, `/`-separated; a stray leading `/` is ignored rather than trusted to mean anything. */
export const preparePath = (path: string): PreparedPath => {
  const trimmed = path.replace(/^\/+/, "")
  const names = trimmed.split("/")
  return { path: trimmed, names, codePoints: names.map((name) => Array.from(name, (ch) => ch.codePointAt(0) ?? 0)) }
}

const classMatches = (token: Extract<CharToken, { t: "class" }>, c: number): boolean => {
  let inside = false
  for (const [lo, hi] of token.ranges) {
    if (c >= lo && c <= hi) {
      inside = true
      break
    }
  }
  return inside !== token.negated
}

/**
 * Greedy star with backtracking to the last star only, O(program x subject) whatever the pattern: on a
 * mismatch, the last star takes one more item and matching resumes after it. `isStar` tells the program's
 * stars; `matches(item, s)` compares a program item with the subject's item `s`.
 */
const greedyMatch = <T>(
  program: ReadonlyArray<T>,
  count: number,
  isStar: (item: T) => boolean,
  matches: (item: T, s: number) => boolean
): boolean => {
  let p = 0
  let s = 0
  let starP = -1
  let starS = 0
  while (s < count) {
    const item = program[p]
    if (item !== undefined) {
      if (isStar(item)) {
        starP = p
        starS = s
        p++
        continue
      }
      if (matches(item, s)) {
        p++
        s++
        continue
      }
    }
    if (starP === -1) return false
    p = starP + 1
    starS++
    s = starS
  }
  while (p < program.length && isStar(program[p]!)) p++
  return p === program.length
}

/** Characters of one name against `*`, `?` and classes. */
const tokensMatch = (tokens: ReadonlyArray<CharToken>, name: ReadonlyArray<number>): boolean =>
  greedyMatch(tokens, name.length, (token) => token.t === "star", (token, s) => {
    const c = name[s]!
    return token.t === "any" || (token.t === "lit" && token.c === c) || (token.t === "class" && classMatches(token, c))
  })

const segmentMatches = (segment: Segment, path: PreparedPath, index: number): boolean => {
  switch (segment.kind) {
    case "literal":
      return path.names[index] === segment.name
    case "anyName":
      return true
    case "tokens":
      return tokensMatch(segment.tokens, path.codePoints[index]!)
    case "doubleStar":
      return true
  }
}

/** The same algorithm one level up: segments are the items and `**` is the star. */
export const matchPrepared = (glob: Glob, path: PreparedPath): boolean =>
  greedyMatch(glob.segments, path.names.length, (segment) => segment.kind === "doubleStar", (segment, s) =>
    segmentMatches(segment, path, s))

/** Does the glob cover this file path (the file itself or a directory above it)? */
export const matches = (glob: Glob, path: string): boolean => matchPrepared(glob, preparePath(path))
