import { describe, expect, it } from "@effect/vitest"
import { makeMasker, MASK, maskedForms } from "./LogMask.ts"

const all = (secrets: ReadonlyArray<string>, pieces: ReadonlyArray<string>) => {
  const masker = makeMasker(secrets)
  return pieces.map(masker.push).join("") + masker.end()
}

describe("LogMask", () => {
  it("masks a secret and its base64, unpadded, URL-safe and URL-encoded forms", () => {
    const secret = "s3cr3t value/+?"
    const b64 = Buffer.from(secret).toString("base64")
    const text = [secret, b64, b64.replace(/=+$/, ""), Buffer.from(secret).toString("base64url"), encodeURIComponent(secret)].join(" | ")
    expect(all([secret], [text])).toBe([MASK, MASK, MASK, MASK, MASK].join(" | "))
  })

  it("masks a secret split across pieces, wherever the split falls", () => {
    const secret = "hunter2-correct-horse"
    const text = `before ${secret} middle ${secret} after`
    for (let cut = 0; cut <= text.length; cut++) {
      expect(all([secret], [text.slice(0, cut), text.slice(cut)])).toBe(`before ${MASK} middle ${MASK} after`)
    }
    expect(all([secret], [...text])).toBe(`before ${MASK} middle ${MASK} after`)
  })

  it("holds back only what may begin a secret, so live output is not delayed", () => {
    const masker = makeMasker(["hunter2-correct-horse"])
    expect(masker.push("tick 1\n")).toBe("tick 1\n")
    expect(masker.push("password: hunt")).toBe("password: ")
    expect(masker.push("er2-correct-horse!")).toBe(`${MASK}!`)
    expect(masker.push("hunting")).toBe("hunting")
    expect(masker.end()).toBe("")
  })

  it("masks the longer of two overlapping secrets whole", () => {
    expect(all(["abcd", "abcdefgh"], ["x abcdefgh y abcd z"])).toBe(`x ${MASK} y ${MASK} z`)
  })

  it("leaves text without secrets unchanged and never loses output", () => {
    expect(all([], ["a", "b"])).toBe("ab")
    expect(all(["zzzzzz"], ["hello ", "world", "\r\n"])).toBe("hello world\r\n")
  })

  it("does not mask values too short to mean anything, and masks each long line of a multi-line secret", () => {
    expect(maskedForms("ab")).toEqual([])
    const key = "-----BEGIN KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END KEY-----"
    expect(all([key], ["line: MIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n"])).toBe(`line: ${MASK}\n`)
  })
})
