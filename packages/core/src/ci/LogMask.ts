/**
 * Masking secrets in a stream of output: every value, and its base64 (padded, unpadded, URL-safe)
 * and URL-encoded forms, becomes `***`. Output arrives in pieces that may split a secret, so the
 * masker holds back the end of a piece only while it is the beginning of some secret's spelling,
 * until the next piece (or the end) shows whether it is one; everything else is shown at once. Values shorter than `MIN_SECRET_LENGTH` are not masked: masking "1"
 * would destroy every log without protecting anything.
 */
export const MIN_SECRET_LENGTH = 3
export const MASK = "***"

const base64 = (value: string) => btoa(String.fromCharCode(...new TextEncoder().encode(value)))

/** The spellings of a secret that are masked. */
export const maskedForms = (secret: string): ReadonlyArray<string> => {
  if (secret.length < MIN_SECRET_LENGTH) return []
  const b64 = base64(secret)
  const forms = new Set([
    secret,
    b64,
    b64.replace(/=+$/, ""),
    b64.replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, ""),
    encodeURIComponent(secret),
    encodeURIComponent(secret).replace(/%20/g, "+")
  ])
  // Each line of a multi-line secret on its own (a private key printed line by line).
  for (const line of secret.split(/\r?\n/)) if (line.trim().length >= 8) forms.add(line)
  return [...forms].filter((form) => form.length >= MIN_SECRET_LENGTH)
}

export interface Masker {
  /** Masks `text` and answers what may be shown now. */
  readonly push: (text: string) => string
  /** Answers what was held back, masked: the end of the stream. */
  readonly end: () => string
}

export const makeMasker = (secrets: Iterable<string>): Masker => {
  // Longest first, so a secret containing another is masked whole.
  const forms = [...new Set([...secrets].flatMap(maskedForms))].sort((a, b) => b.length - a.length)
  if (forms.length === 0) return { push: (text) => text, end: () => "" }
  const longest = forms[0]!.length - 1
  const mask = (text: string) => forms.reduce((out, form) => out.split(form).join(MASK), text)
  /** The length of the longest end of `text` that begins some form (a secret it may yet complete). */
  const pending = (text: string) => {
    for (let k = Math.min(longest, text.length); k > 0; k--) {
      const end = text.slice(text.length - k)
      if (forms.some((form) => form.startsWith(end))) return k
    }
    return 0
  }
  let held = ""
  return {
    push: (text) => {
      const masked = mask(held + text)
      const cut = masked.length - pending(masked)
      held = masked.slice(cut)
      return masked.slice(0, cut)
    },
    end: () => {
      const out = mask(held)
      held = ""
      return out
    }
  }
}
