import { describe, expect, it } from "@effect/vitest"
import { renderMarkdown } from "./Markdown.ts"
import { html, trusted } from "./Render.ts"
import { checkCsrf, maskCsrf, newCsrfSecret } from "./Session.ts"
import { localTarget } from "./SignInPage.ts"

describe("web templates", () => {
  it("escapes every interpolated text and attribute value", () => {
    const evil = `"><script>alert(1)</script>'`
    expect(html`<a href=${evil} title="x">${evil}</a>`.value).toBe(
      `<a href="&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;&#39;" title="x">&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;&#39;</a>`
    )
  })

  it("leaves out null, undefined and false attributes and children, writes true bare, and nests templates unescaped", () => {
    const inner = html`<i>${"<b>"}</i>`
    expect(html`<details open=${true} class=${undefined} id=${false}>${null}${[inner, "&", 3]}</details>`.value).toBe(
      "<details open><i>&lt;b&gt;</i>&amp;3</details>"
    )
    expect(html`<input type="hidden" value=${"a"} />`.value).toBe(`<input type="hidden" value="a">`)
  })

  it("inserts trusted HTML only through trusted()", () => {
    expect(trusted("div", "markdown", "<p>ok</p>").value).toBe(`<div class="markdown"><p>ok</p></div>`)
    expect(html`<div>${"<p>ok</p>"}</div>`.value).toBe("<div>&lt;p&gt;ok&lt;/p&gt;</div>")
  })
})

describe("Markdown", () => {
  it("renders Markdown and drops scripts, handlers, styles and javascript: links", () => {
    const out = renderMarkdown("# Title\n\n<script>x()</script>\n\n<img src=x onerror=alert(1)>\n\n[a](javascript:alert(1)) [b](https://example.org)\n")
    expect(out).toContain("<h1>Title</h1>")
    expect(out).not.toContain("<script")
    // Raw HTML in the source stays text: escaped, never an element.
    expect(out).toContain("&lt;script&gt;")
    expect(out).not.toMatch(/<img[^>]*onerror/)
    expect(out).not.toContain('href="javascript')
    expect(out).toContain('<a href="https://example.org" rel="nofollow noopener">b</a>')
  })
})

describe("CSRF tokens", () => {
  it("masks the secret differently each time, and only the secret's masks pass", () => {
    const secret = newCsrfSecret()
    const a = maskCsrf(secret)
    const b = maskCsrf(secret)
    expect(a).not.toBe(b)
    expect(checkCsrf(a, secret)).toBe(true)
    expect(checkCsrf(b, secret)).toBe(true)
    expect(checkCsrf(a, newCsrfSecret())).toBe(false)
    expect(checkCsrf(secret, secret)).toBe(false)
    expect(checkCsrf("", secret)).toBe(false)
    expect(checkCsrf(a, undefined)).toBe(false)
  })

  it("sends a sign-in only to a path on this site", () => {
    expect(localTarget("/alice/hello")).toBe("/alice/hello")
    expect(["//evil.example/x", "https://evil.example", "/\\evil.example", null, "", "javascript:x"].map(localTarget)).toEqual(["/", "/", "/", "/", "/", "/"])
  })
})
