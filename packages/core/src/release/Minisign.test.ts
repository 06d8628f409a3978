import { describe, expect, it } from "@effect/vitest"
import { execFileSync, spawnSync } from "node:child_process"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as Minisign from "./Minisign.ts"

const withDir = async (run: (dir: string) => Promise<void>) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "grove-minisign-"))
  try {
    await run(dir)
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

/** Debian's `minisign -Vm`: the reference verifier. */
const minisignVerifies = (file: string, pub: string) => spawnSync("minisign", ["-Vm", file, "-p", pub], { encoding: "utf8" })

describe("Minisign", () => {
  it("signs what minisign -Vm accepts with a key from minisign -G -W, and verifies minisign's own signatures", () =>
    withDir(async (dir) => {
      const pub = path.join(dir, "k.pub")
      const sec = path.join(dir, "k.sec")
      execFileSync("minisign", ["-G", "-W", "-p", pub, "-s", sec], { stdio: "ignore" })
      const key = await Minisign.readSecretKey(fs.readFileSync(sec, "utf8"))
      expect(Minisign.publicKeyFile(key).split("\n")[1]).toBe(fs.readFileSync(pub, "utf8").split("\n")[1])

      const file = path.join(dir, "grove")
      const bytes = randomBytes(300_000)
      fs.writeFileSync(file, bytes)
      const prehash = Minisign.prehasher().update(bytes).digest()
      fs.writeFileSync(`${file}.minisig`, Minisign.signPrehashed(key, prehash, "grove 1.2.3 linux-x86_64"))
      const ok = minisignVerifies(file, pub)
      expect(ok.status, ok.stderr).toBe(0)
      expect(ok.stdout).toContain("Trusted comment: grove 1.2.3 linux-x86_64")

      const publicKey = Minisign.readPublicKey(fs.readFileSync(pub, "utf8"))
      expect(Minisign.verifySignature(publicKey, fs.readFileSync(`${file}.minisig`, "utf8"), bytes)).toBe("grove 1.2.3 linux-x86_64")

      // A tampered file fails both verifiers.
      const tampered = Buffer.from(bytes)
      tampered[1000] = tampered[1000]! ^ 1
      fs.writeFileSync(file, tampered)
      expect(minisignVerifies(file, pub).status).not.toBe(0)
      expect(() => Minisign.verifySignature(publicKey, fs.readFileSync(`${file}.minisig`, "utf8"), tampered)).toThrow(/verification failed/)

      // minisign's own signatures, prehashed (the default) and legacy (-l), verify here.
      fs.writeFileSync(file, bytes)
      for (const legacy of [false, true]) {
        execFileSync("minisign", ["-S", ...(legacy ? ["-l"] : []), "-s", sec, "-m", file, "-t", `legacy ${legacy}`], { stdio: "ignore" })
        expect(Minisign.verifySignature(publicKey, fs.readFileSync(`${file}.minisig`, "utf8"), bytes)).toBe(`legacy ${legacy}`)
      }

      // Another key's signature is refused by its key id, and a forged trusted comment by the global signature.
      const other = path.join(dir, "other.pub")
      execFileSync("minisign", ["-G", "-W", "-p", other, "-s", path.join(dir, "other.sec")], { stdio: "ignore" })
      const signature = fs.readFileSync(`${file}.minisig`, "utf8")
      expect(() => Minisign.verifySignature(Minisign.readPublicKey(fs.readFileSync(other, "utf8")), signature, bytes)).toThrow(/another key/)
      const forged = signature.replace("trusted comment: legacy true", "trusted comment: grove 9.9.9")
      expect(() => Minisign.verifySignature(publicKey, forged, bytes)).toThrow(/trusted comment/)
    }))

  it("decrypts a password-protected key (scrypt, as minisign -G writes it) and refuses a wrong password", () =>
    withDir(async (dir) => {
      const pub = path.join(dir, "k.pub")
      const sec = path.join(dir, "k.sec")
      // minisign reads the password (twice) from stdin when it is not a terminal.
      execFileSync("minisign", ["-G", "-p", pub, "-s", sec], { input: "s3cret\ns3cret\n", stdio: ["pipe", "ignore", "ignore"] })
      const text = fs.readFileSync(sec, "utf8")
      expect(Minisign.isEncrypted(text)).toBe(true)
      await expect(Minisign.readSecretKey(text)).rejects.toThrow(/encrypted/)
      await expect(Minisign.readSecretKey(text, "wrong")).rejects.toThrow(/wrong password/)
      const key = await Minisign.readSecretKey(text, "s3cret")
      const file = path.join(dir, "f")
      fs.writeFileSync(file, "hello\n")
      fs.writeFileSync(`${file}.minisig`, Minisign.signPrehashed(key, Minisign.prehasher().update("hello\n").digest(), "t"))
      expect(minisignVerifies(file, pub).status).toBe(0)
    }), 120_000)

  it("picks libsodium's scrypt parameters for minisign's limits", () => {
    // minisign's defaults (sensitive): N = 2^20, r = 8, p = 1.
    expect(Minisign.scryptParams(33554432n, 1073741824n)).toEqual({ N: 2 ** 20, r: 8, p: 1 })
    expect(Minisign.scryptParams(524288n, 16777216n)).toEqual({ N: 2 ** 14, r: 8, p: 1 })
  })
})
