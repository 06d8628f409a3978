import { describe, expect, it } from "@effect/vitest"
import { ansiToHtml, encodeStates, parseStates, PLAIN, tailToHtml } from "./CiAnsi.ts"

const ESC = "\x1b"

describe("ansiToHtml", () => {
  it("renders SGR colours and bold as classes and escapes the text", () => {
    const { html, state } = ansiToHtml(`${ESC}[31merror${ESC}[0m <b>&"' ${ESC}[1;92mok${ESC}[22m plain green${ESC}[39m done`)
    expect(html).toBe(
      `<span class="a-f31">error</span> &lt;b&gt;&amp;&quot;&#39; <span class="a-b a-f92">ok</span><span class="a-f92"> plain green</span> done`
    )
    expect(state).toEqual(PLAIN)
    expect(html).not.toContain("style")
  })

  it("drops other escape sequences and does not read 256-colour arguments as colours", () => {
    expect(ansiToHtml(`a${ESC}[2K${ESC}[1Gb${ESC}]0;title${ESC}\\c${ESC}[38;5;31md${ESC}[m\r\n`).html).toBe("abcd\n")
  })

  it("carries the colour and a half-written sequence from one piece to the next", () => {
    const first = ansiToHtml(`${ESC}[33mwarn `)
    const second = ansiToHtml(`still${ESC}[`, first.state)
    expect(second.html).toBe(`<span class="a-f33">still</span>`)
    expect(second.state.pending).toBe(`${ESC}[`)
    const third = ansiToHtml(`0mafter`, second.state)
    expect(third.html).toBe("after")
  })
})

describe("tailToHtml", () => {
  it("keeps the last lines with the colour in force where they start", () => {
    const text = `${ESC}[34mone\ntwo\n${ESC}[0mthree\nfour\n`
    expect(tailToHtml(text, 3)).toMatchObject({ cut: true, html: `<span class="a-f34">two\n</span>three\nfour\n` })
    expect(tailToHtml(text, 4)).toMatchObject({ cut: false })
    expect(tailToHtml("a\nb", 1)).toMatchObject({ cut: true, html: "b" })
    expect(tailToHtml("", 10)).toMatchObject({ cut: false, html: "" })
  })

  it("cuts a long log to exactly the last 1,000 lines", () => {
    const text = Array.from({ length: 2500 }, (_, i) => `line ${i + 1}\n`).join("")
    const { html, cut } = tailToHtml(text, 1000)
    expect(cut).toBe(true)
    expect(html.split("\n").filter((l) => l !== "")).toHaveLength(1000)
    expect(html.startsWith("line 1501\n")).toBe(true)
  })
})

describe("the colours carried from a page to its live events", () => {
  it("round-trips the states that are not plain and refuses anything else", () => {
    const states = new Map([[3, ansiToHtml(`${ESC}[1;35mhalf${ESC}[`).state], [4, PLAIN]])
    const text = encodeStates(states)!
    expect(parseStates(text)).toEqual(new Map([[3, { fg: 35, bold: true, pending: `${ESC}[` }]]))
    expect(encodeStates(new Map([[4, PLAIN]]))).toBeUndefined()
    expect(parseStates("{not json")).toEqual(new Map())
    expect(parseStates(JSON.stringify({ "3": [31, 0, "<script>"], x: [31, 0, ""], "5": [12, 1, ""] }))).toEqual(new Map([[5, { fg: undefined, bold: true, pending: "" }]]))
    // The page's last piece ended inside a sequence: the live piece finishes it.
    expect(ansiToHtml("31mred", parseStates(text).get(3)!).html).toBe(`<span class="a-b a-f31">red</span>`)
  })
})
