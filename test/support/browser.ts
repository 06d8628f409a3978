/**
 * Driving Debian's Chromium (playwright-core pointed at the system binary; browser downloads are not
 * possible here) for the browser suites: launching it, watching a page's CSP violations and script
 * errors, running axe-core inside the page, and screenshots at the two widths the pages are made for.
 *
 * GROVE_CHROMIUM names another binary. Screenshots go to `.tmp/test-output/<suite>/` (git-ignored).
 */
import { expect } from "@effect/vitest"
import * as fs from "node:fs"
import { createRequire } from "node:module"
import * as path from "node:path"
import { type Browser, type BrowserContext, chromium, type Page } from "playwright-core"
import { ROOT } from "./GroveServer.ts"

const CANDIDATES = ["/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome", "/usr/bin/google-chrome-stable"]

export const chromiumPath = [process.env["GROVE_CHROMIUM"], ...CANDIDATES].find((candidate): candidate is string =>
  candidate !== undefined && candidate !== "" && fs.existsSync(candidate)
)

export const skipWithoutChromium = (suite: string): boolean => {
  if (chromiumPath !== undefined) return false
  console.warn(
    `${suite} skipped: no Chromium binary (looked for ${CANDIDATES.join(", ")}; ` +
      "install Debian's chromium, e.g. bash scripts/setup/system-deps.sh, or set GROVE_CHROMIUM)"
  )
  return true
}

export const launchBrowser = (): Promise<Browser> => chromium.launch({ executablePath: chromiumPath!, headless: true, timeout: 60_000 })

export const WIDTHS = [1280, 390] as const

/** Console lines and `securitypolicyviolation` events of a page, however many documents it goes through. */
export const watchPage = async (page: Page) => {
  const violations: Array<string> = []
  const errors: Array<string> = []
  page.on("console", (message) => {
    if (/Content[ -]Security[ -]Policy/i.test(message.text())) violations.push(`console: ${message.text()}`)
    // Error pages (404, 409, 412) are logged by Chromium as failed resource loads: only script errors count.
    else if (message.type() === "error" && !/Failed to load resource/.test(message.text())) errors.push(`${message.text()} (${message.location().url})`)
  })
  page.on("pageerror", (error) => errors.push(error.message))
  await page.exposeBinding("groveReportCsp", (_source, text: string) => {
    violations.push(`event: ${text}`)
  })
  // As a string: this project's types have no DOM.
  await page.addInitScript({
    content: `document.addEventListener("securitypolicyviolation", (event) => {
      void window.groveReportCsp(event.violatedDirective + " blocked " + event.blockedURI + " on " + event.documentURI)
    })`
  })
  return { violations, errors }
}

/**
 * Pages, each in a fresh context 1280 px wide and watched (`watchPage`), for a suite whose browser is
 * launched later; `closeAll` (in its afterAll) closes every context it opened, and the browser.
 */
export const pageOpener = (browser: () => Browser) => {
  const contexts: Array<BrowserContext> = []
  return {
    open: async () => {
      const context = await browser().newContext({ viewport: { width: 1280, height: 900 } })
      contexts.push(context)
      const page = await context.newPage()
      return { context, page, watch: await watchPage(page) }
    },
    /** Its contexts, then the browser (not launched when the suite's set-up failed). */
    closeAll: async () => {
      for (const context of contexts.splice(0)) await context.close().catch(() => undefined)
      await (browser() as Browser | undefined)?.close()
    }
  }
}

const axeSource = fs.readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8")

export interface AxeFinding {
  readonly id: string
  readonly impact: string
  readonly help: string
  readonly targets: ReadonlyArray<string>
}

/**
 * axe-core's serious and critical findings on the page as it is now. The script is evaluated through
 * the driver (not a <script> tag), so the page's CSP stays as strict as it is.
 */
export const axeFindings = async (page: Page): Promise<ReadonlyArray<AxeFinding>> => {
  await page.evaluate(axeSource)
  const result = await page.evaluate(`axe.run(document, { resultTypes: ["violations"] }).then((r) => r.violations.map((v) => ({
    id: v.id, impact: v.impact ?? "", help: v.help, targets: v.nodes.map((n) => String(n.target))
  })))`) as ReadonlyArray<AxeFinding>
  return result.filter((finding) => finding.impact === "serious" || finding.impact === "critical")
}

export const outputFolder = (suite: string): string => {
  const folder = path.join(ROOT, ".tmp", "test-output", suite)
  fs.mkdirSync(folder, { recursive: true })
  return folder
}

/**
 * At each width: a full-page screenshot into the output folder, the page's visible text (which must
 * contain `expected`), and axe's serious or critical findings (which must be none). Returns what it
 * found, for the test to assert on.
 */
export const checkAtWidths = async (page: Page, folder: string, name: string) => {
  const out: Array<{ width: number; file: string; bytes: number; text: string; findings: ReadonlyArray<AxeFinding>; overflow: boolean }> = []
  for (const width of WIDTHS) {
    await page.setViewportSize({ width, height: 900 })
    const file = path.join(folder, `${name}-${width}.png`)
    await page.screenshot({ path: file, fullPage: true })
    const text = await page.evaluate("document.body.innerText") as string
    // Nothing wider than the window (a horizontal scrollbar on the page itself); code and diffs scroll in their own boxes.
    const overflow = await page.evaluate("document.documentElement.scrollWidth > window.innerWidth + 1") as boolean
    out.push({ width, file, bytes: fs.statSync(file).size, text, findings: await axeFindings(page), overflow })
  }
  return out
}

/**
 * `checkAtWidths` asserted, as every browser suite does it: the visible text holds `expected`, the
 * screenshot is not blank, axe finds nothing serious or critical, nothing overflows; back at 1280 px after.
 */
export const expectPageChecks = async (page: Page, folder: string, name: string, expected: string) => {
  for (const shot of await checkAtWidths(page, folder, name)) {
    expect(shot.text, `${name} at ${shot.width}`).toContain(expected)
    expect(shot.bytes, `${name} screenshot at ${shot.width}`).toBeGreaterThan(5_000)
    expect(shot.findings, `${name} axe at ${shot.width}`).toEqual([])
    expect(shot.overflow, `${name} overflows at ${shot.width}`).toBe(false)
  }
  await page.setViewportSize({ width: 1280, height: 900 })
}

/** Signs in through the sign-in form and waits for the home page. */
export const signInAs = async (page: Page, siteUrl: string, user: string, password: string) => {
  await page.goto(`${siteUrl}/-/signin`)
  await page.getByLabel("User name").fill(user)
  await page.getByLabel("Password").fill(password)
  await Promise.all([page.waitForURL(`${siteUrl}/`), page.getByRole("button", { name: "Sign in" }).click()])
}
