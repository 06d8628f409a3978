/** Minimal, escaped HTML for the few server-rendered pages. */
import { PAGE_CSP } from "./SecurityHeaders.ts"

export const escapeHtml = (value: string): string =>
  value.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", "\"": "&quot;", "'": "&#39;" })[c]!)

export const page = (title: string, body: string): string =>
  `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)} · Grove</title>
<style>
  body { font-family: system-ui, sans-serif; max-width: 28rem; margin: 4rem auto; padding: 0 1rem; color: #1f2328; }
  h1 { font-size: 1.4rem; }
  label { display: block; margin: 0.8rem 0 0.2rem; }
  input[type=text], input[type=password] { width: 100%; padding: 0.5rem; font-size: 1rem; box-sizing: border-box; }
  button { margin-top: 1.2rem; padding: 0.6rem 1.2rem; font-size: 1rem; }
  .error { color: #b42318; }
  .code { font: 2rem ui-monospace, monospace; letter-spacing: 0.15rem; padding: 1rem; background: #f6f8fa; text-align: center; }
</style>
</head>
<body>
${body}
</body>
</html>
`

/**
 * Pages that show secrets or forms: never cached, never framed, no scripts, and no referrer to
 * other sites. `same-origin` rather than `no-referrer`: under `no-referrer` a browser sends
 * `Origin: null` with the sign-in form's POST, which the form's Origin check must refuse.
 */
export const pageHeaders = {
  "cache-control": "no-store",
  "x-frame-options": "DENY",
  "x-content-type-options": "nosniff",
  "content-security-policy": PAGE_CSP,
  "referrer-policy": "same-origin"
}
