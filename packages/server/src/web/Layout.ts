/**
 * The frame of every page: landmarks (banner with the site navigation, main, contentinfo), a skip
 * link, breadcrumbs, and the sign-in state. One stylesheet; the script only on pages that ask for it.
 */
import { SERVER_VERSION } from "../Version.ts"
import { scriptUrl, stylesheetUrl } from "./Assets.ts"
import { type Html, html, type Node } from "./Render.ts"
import { maskCsrf, type PageSession } from "./Session.ts"

export interface Crumb {
  readonly label: string
  readonly href?: string | undefined
}

export interface LayoutInput {
  readonly title: string
  readonly session: PageSession
  readonly crumbs?: ReadonlyArray<Crumb> | undefined
  /** The progressive-enhancement script (merge without reload); pages that only read leave it out. */
  readonly script?: boolean | undefined
  readonly body: Node
}

/** The hidden CSRF field every form carries (a fresh mask each time). */
export const csrfField = (session: PageSession): Node =>
  session.csrfSecret === undefined ? null : html`<input type="hidden" name="csrf" value=${maskCsrf(session.csrfSecret)} />`

export const breadcrumbs = (crumbs: ReadonlyArray<Crumb>): Node =>
  crumbs.length === 0 ? null : html`<nav aria-label="Breadcrumbs"><ol class="crumbs">${
    crumbs.map((crumb, i) =>
      i === crumbs.length - 1 || crumb.href === undefined
        ? html`<li><span aria-current=${i === crumbs.length - 1 ? "page" : undefined}>${crumb.label}</span></li>`
        : html`<li><a href=${crumb.href}>${crumb.label}</a></li>`
    )
  }</ol></nav>`

const account = (session: PageSession): Node =>
  session.user === undefined
    ? html`<a href="/-/signin">Sign in</a>`
    : html`<span>${session.user.username}</span>
      <a href="/-/orgs">Organizations</a>
      <a href="/-/settings/keys">API keys</a>
      <form method="post" action="/-/signout">${csrfField(session)}<button type="submit">Sign out</button></form>`

export const layout = (input: LayoutInput): Html =>
  html`<html lang="en">
<head>
<meta charset="utf-8" />
<meta name="viewport" content="width=device-width, initial-scale=1" />
<meta name="color-scheme" content="light dark" />
<title>${input.title} · Grove</title>
<link rel="icon" href="data:," />
<link rel="stylesheet" href=${stylesheetUrl} />
${input.script === true ? html`<script src=${scriptUrl} defer></script>` : null}
</head>
<body>
<a class="skip" href="#main">Skip to content</a>
<header class="top"><nav aria-label="Site"><a class="brand" href="/">Grove</a><span class="spacer"></span>${account(input.session)}</nav></header>
<main id="main">${breadcrumbs(input.crumbs ?? [])}${input.body}</main>
<footer class="foot">Grove ${SERVER_VERSION} · <a href="/api/openapi.json">API</a></footer>
</body>
</html>`
