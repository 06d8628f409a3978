/**
 * The minisign format (https://jedisct1.github.io/minisign/) with Ed25519 from node:crypto, so
 * neither the server (signing releases) nor the client (`grove upgrade`) needs the minisign binary.
 *
 * - Secret key file (`minisign -G`): "untrusted comment" line, then base64 of
 *   `Ed | kdf (Sc or 0000) | B2 | salt(32) | opslimit(8 LE) | memlimit(8 LE) | keynum(8) sk(64) checksum(32)`;
 *   the last 104 bytes are XORed with scrypt(password) when encrypted.
 * - Signature: "untrusted comment", base64(`ED | keynum | ed25519(blake2b512(file))`), "trusted comment: ...",
 *   base64(ed25519(signature || trusted comment)). `Ed` (legacy) signs the file itself.
 * - Public key: "untrusted comment", base64(`Ed | keynum | pk(32)`).
 */
import { createHash, createPrivateKey, createPublicKey, type KeyObject, scrypt, sign, verify } from "node:crypto"

export class MinisignError extends Error {}

export interface SecretKey {
  /** 8 bytes identifying the key pair in signatures and public keys. */
  readonly keyId: Uint8Array
  readonly privateKey: KeyObject
  readonly publicKey: Uint8Array
}

export interface PublicKey {
  readonly keyId: Uint8Array
  readonly key: KeyObject
}

const SECRET_KEY_BYTES = 158
const ENCRYPTED_FROM = 54
const b64url = (bytes: Uint8Array) => Buffer.from(bytes).toString("base64url")
const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString("hex").toUpperCase()

/** The base64 payload after the "untrusted comment:" line. */
const payloadOf = (text: string, what: string): Buffer => {
  const lines = text.split(/\r?\n/).map((line) => line.trim()).filter((line) => line.length > 0)
  const body = lines[0]?.startsWith("untrusted comment:") === true ? lines[1] : lines[0]
  if (body === undefined || !/^[A-Za-z0-9+/]+=*$/.test(body)) throw new MinisignError(`not a minisign ${what}`)
  return Buffer.from(body, "base64")
}

/** libsodium's scryptsalsa208sha256 parameters from minisign's opslimit and memlimit (pickparams). */
export const scryptParams = (opslimit: bigint, memlimit: bigint): { N: number; r: number; p: number } => {
  const ops = opslimit < 32768n ? 32768n : opslimit
  const r = 8n
  let logN = 1n
  if (ops < memlimit / 32n) {
    const maxN = ops / (r * 4n)
    while (logN < 63n && (1n << logN) <= maxN / 2n) logN++
    return { N: Number(1n << logN), r: 8, p: 1 }
  }
  const maxN = memlimit / (r * 128n)
  while (logN < 63n && (1n << logN) <= maxN / 2n) logN++
  let maxrp = (ops / 4n) / (1n << logN)
  if (maxrp > 0x3fffffffn) maxrp = 0x3fffffffn
  return { N: Number(1n << logN), r: 8, p: Math.max(1, Number(maxrp / r)) }
}

const derive = (password: string, salt: Uint8Array, params: { N: number; r: number; p: number }) =>
  new Promise<Buffer>((resolve, reject) =>
    scrypt(password, salt, 104, { ...params, maxmem: 128 * params.N * params.r * params.p + 64 * 1024 * 1024 }, (error, key) =>
      error === null ? resolve(key) : reject(error)
    )
  )

/** Whether a secret key file is password-protected (its kdf is scrypt). */
export const isEncrypted = (text: string): boolean => payloadOf(text, "secret key").subarray(2, 4).toString("latin1") === "Sc"

/** Reads a secret key file as `minisign -G` writes it; `password` for an encrypted one. */
export const readSecretKey = async (text: string, password?: string): Promise<SecretKey> => {
  const raw = payloadOf(text, "secret key")
  if (raw.length !== SECRET_KEY_BYTES || raw.subarray(0, 2).toString("latin1") !== "Ed") {
    throw new MinisignError("not a minisign Ed25519 secret key")
  }
  const kdf = raw.subarray(2, 4).toString("latin1")
  const secret = Buffer.from(raw.subarray(ENCRYPTED_FROM))
  if (kdf === "Sc") {
    if (password === undefined) throw new MinisignError("the secret key is encrypted: give its password")
    const params = scryptParams(raw.readBigUInt64LE(38), raw.readBigUInt64LE(46))
    const stream = await derive(password, raw.subarray(6, 38), params)
    for (let i = 0; i < secret.length; i++) secret[i]! ^= stream[i]!
  } else if (kdf !== "\0\0") {
    throw new MinisignError("unknown key derivation in the secret key")
  }
  const keyId = new Uint8Array(secret.subarray(0, 8))
  const seed = secret.subarray(8, 40)
  const publicKey = new Uint8Array(secret.subarray(40, 72))
  const privateKey = createPrivateKey({ key: { kty: "OKP", crv: "Ed25519", d: b64url(seed), x: b64url(publicKey) }, format: "jwk" })
  // An Ed25519 secret key is seed || public key: a wrong password yields a seed whose key does not match.
  const derived = createPublicKey(privateKey).export({ format: "jwk" }).x
  if (derived !== b64url(publicKey)) {
    throw new MinisignError(kdf === "Sc" ? "wrong password for the secret key" : "the secret key is damaged")
  }
  return { keyId, privateKey, publicKey }
}

/** The public key file (`minisign.pub`) of a secret key. */
export const publicKeyFile = (key: SecretKey): string =>
  `untrusted comment: minisign public key ${hex(key.keyId)}\n${publicKeyString(key)}\n`

/** The public key as one base64 string (`minisign -P`). */
export const publicKeyString = (key: SecretKey): string =>
  Buffer.concat([Buffer.from("Ed", "latin1"), key.keyId, key.publicKey]).toString("base64")

/** Reads a public key: a `minisign.pub` file's text or the base64 string alone. */
export const readPublicKey = (text: string): PublicKey => {
  const raw = payloadOf(text, "public key")
  if (raw.length !== 42 || raw.subarray(0, 2).toString("latin1") !== "Ed") throw new MinisignError("not a minisign Ed25519 public key")
  const key = createPublicKey({ key: { kty: "OKP", crv: "Ed25519", x: b64url(raw.subarray(10)) }, format: "jwk" })
  return { keyId: new Uint8Array(raw.subarray(2, 10)), key }
}

/** BLAKE2b-512, what a prehashed (`ED`) signature signs; feed it the file as it streams. */
export const prehasher = () => createHash("blake2b512")

/** A trusted comment is one line. */
const oneLine = (text: string) => text.replace(/[\r\n]+/g, " ")

/** The `.minisig` text for a file whose BLAKE2b-512 is `prehash`. */
export const signPrehashed = (key: SecretKey, prehash: Uint8Array, trustedComment: string): string => {
  const comment = oneLine(trustedComment)
  const signature = sign(null, prehash, key.privateKey)
  const global = sign(null, Buffer.concat([signature, Buffer.from(comment, "utf8")]), key.privateKey)
  const head = Buffer.concat([Buffer.from("ED", "latin1"), key.keyId, signature]).toString("base64")
  return `untrusted comment: signature from minisign secret key\n${head}\ntrusted comment: ${comment}\n${global.toString("base64")}\n`
}

/**
 * Checks `.minisig` text against the file's bytes and the public key: the key id, the file's
 * signature (prehashed or legacy) and the trusted comment's. Answers the trusted comment.
 */
export const verifySignature = (publicKey: PublicKey, signatureText: string, file: Uint8Array): string => {
  const lines = signatureText.split(/\r?\n/)
  const head = payloadOf(lines.slice(0, 2).join("\n"), "signature")
  const trusted = lines[2] ?? ""
  if (head.length !== 74 || !trusted.startsWith("trusted comment: ")) throw new MinisignError("not a minisign signature")
  const algorithm = head.subarray(0, 2).toString("latin1")
  if (algorithm !== "ED" && algorithm !== "Ed") throw new MinisignError("unknown signature algorithm")
  if (!Buffer.from(head.subarray(2, 10)).equals(Buffer.from(publicKey.keyId))) {
    throw new MinisignError("the signature was made with another key")
  }
  const signature = head.subarray(10)
  const message = algorithm === "ED" ? prehasher().update(file).digest() : file
  if (!verify(null, message, publicKey.key, signature)) throw new MinisignError("signature verification failed")
  const comment = trusted.slice("trusted comment: ".length)
  const global = Buffer.from((lines[3] ?? "").trim(), "base64")
  if (!verify(null, Buffer.concat([signature, Buffer.from(comment, "utf8")]), publicKey.key, global)) {
    throw new MinisignError("the trusted comment's signature is invalid")
  }
  return comment
}
