/**
 * The names of Grove's compact pull answer (a Grove extension of `GET pull`; its shape and rules are api's
 * PullCompact): what a client asks it by and what a server advertises and answers it with. Apart from the rest so a
 * clone's early pull (sent before the API's schemas load) asks for it too.
 */

/** The capability key and value (`GET capabilities`). */
export const CAPABILITY = "pull_answer"
export const COMPACT_V1 = "compact_v1"
/** The media type that asks for the compact answer and names it. */
export const CONTENT_TYPE = "application/vnd.grove.pull-compact-v1+json"
/** The Accept of grove's pull: the compact answer, else the plain one (a server without it ignores the first). */
export const ACCEPT = `${CONTENT_TYPE}, application/json;q=0.5`

/** Whether an Accept header takes the compact answer (listed, and not with `q=0`). */
export const acceptsCompact = (accept: string | undefined): boolean => {
  if (accept === undefined || !accept.toLowerCase().includes(CONTENT_TYPE)) return false
  for (const range of accept.split(",")) {
    const [type, ...parameters] = range.split(";").map((part) => part.trim().toLowerCase())
    if (type !== CONTENT_TYPE) continue
    const q = parameters.find((p) => p.startsWith("q="))
    return q === undefined || Number(q.slice(2)) > 0
  }
  return false
}

/** Whether a content type (an answer's header) is the compact answer's. */
export const isCompact = (contentType: string | undefined): boolean =>
  contentType !== undefined && contentType.split(";")[0]!.trim().toLowerCase() === CONTENT_TYPE
