/**
 * Token and password material. Tokens are `grove_` + 43 base62 characters
 * (256 random bits); only their SHA-256 is stored. Passwords use scrypt.
 */
import { hash, randomBytes, scrypt } from "node:crypto"

export const TOKEN_PREFIX = "grove_"
const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

const randomBase62 = (length: number): string => {
  // Rejection sampling keeps every character uniformly distributed.
  let out = ""
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      if (byte < 248 && out.length < length) out += BASE62[byte % 62]
    }
  }
  return out
}

export const newToken = (): string => TOKEN_PREFIX + randomBase62(43)

/** Tokens are looked up by this hash; the secret itself is never stored. */
// One-shot `hash`: no Hash object per request.
export const hashToken = (token: string): string => hash("sha256", token, "hex")

/** What listings show of a token: enough to recognise it, far too little to use it. */
export const tokenPrefix = (token: string): string => token.slice(0, TOKEN_PREFIX.length + 6)

export const looksLikeToken = (value: string): boolean => /^grove_[0-9A-Za-z]{20,100}$/.test(value)

/** Compares two hex digests without an early exit (and without two Buffers per request). */
export const constantTimeEqualHex = (a: string, b: string): boolean => {
  if (a.length !== b.length) return false
  let difference = 0
  for (let i = 0; i < a.length; i++) difference |= a.charCodeAt(i) ^ b.charCodeAt(i)
  return difference === 0
}

/** Human-typable one-time code for the headless sign-in: 10 characters of Crockford base32 (50 bits). */
export const newOneTimeCode = (): string => {
  const alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
  let out = ""
  for (const byte of randomBytes(10)) out += alphabet[byte & 31]
  return `${out.slice(0, 5)}-${out.slice(5)}`
}

export const normalizeOneTimeCode = (code: string): string => code.trim().toUpperCase().replace(/[^0-9A-Z]/g, "")

const SCRYPT = { N: 16384, r: 8, p: 1, keylen: 32 }

const scryptAsync = (password: string, salt: Buffer, N: number, r: number, p: number, keylen: number) =>
  new Promise<Buffer>((resolve, reject) =>
    scrypt(password, salt, keylen, { N, r, p, maxmem: 64 * 1024 * 1024 }, (error, key) => error ? reject(error) : resolve(key))
  )

export const hashPassword = async (password: string): Promise<string> => {
  const salt = randomBytes(16)
  const key = await scryptAsync(password, salt, SCRYPT.N, SCRYPT.r, SCRYPT.p, SCRYPT.keylen)
  return `scrypt$${SCRYPT.N}$${SCRYPT.r}$${SCRYPT.p}$${salt.toString("hex")}$${key.toString("hex")}`
}

export const verifyPassword = async (password: string, stored: string): Promise<boolean> => {
  const [scheme, n, r, p, salt, key] = stored.split("$")
  if (scheme !== "scrypt" || n === undefined || r === undefined || p === undefined || !salt || !key) return false
  const derived = await scryptAsync(password, Buffer.from(salt, "hex"), Number(n), Number(r), Number(p), key.length / 2)
  return constantTimeEqualHex(derived.toString("hex"), key)
}
