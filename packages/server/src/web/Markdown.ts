/**
 * README rendering: markdown-it (raw HTML in the source stays text) and then sanitize-html with an
 * allow-list, so neither a script, an event handler, a style attribute nor a `javascript:` link
 * survives, and the page's CSP never needs `unsafe-inline`.
 */
import MarkdownIt from "markdown-it"
import sanitizeHtml from "sanitize-html"

const markdown = new MarkdownIt({ html: false, linkify: true, typographer: false })

const SANITIZE: sanitizeHtml.IOptions = {
  allowedTags: [
    ...sanitizeHtml.defaults.allowedTags.filter((tag) => tag !== "img"),
    "img",
    "del",
    "input"
  ],
  allowedAttributes: {
    a: ["href", "title", "rel"],
    img: ["src", "alt", "title"],
    code: ["class"],
    th: ["align"],
    td: ["align"],
    ol: ["start"]
  },
  allowedClasses: { code: [/^language-[\w-]+$/] },
  allowedSchemes: ["http", "https", "mailto"],
  // Images from other sites would be blocked by the CSP anyway (img-src 'self'); relative ones stay.
  allowedSchemesByTag: { img: [] },
  allowProtocolRelative: false,
  transformTags: { a: sanitizeHtml.simpleTransform("a", { rel: "nofollow noopener" }) }
}

export const renderMarkdown = (source: string): string => sanitizeHtml(markdown.render(source), SANITIZE)
