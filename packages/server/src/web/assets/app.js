// Progressive enhancement only: every page reads and every form works without this script.
// A form marked data-enhance submits in the background and swaps in the answer's <main>,
// so a merge (or a refused one, with its conflicts) shows without a full reload.
document.addEventListener("submit", async (event) => {
  const form = event.target
  if (!(form instanceof HTMLFormElement) || !form.hasAttribute("data-enhance")) return
  event.preventDefault()
  const button = event.submitter
  if (button instanceof HTMLButtonElement) button.disabled = true
  const body = new URLSearchParams(new FormData(form, event.submitter))
  try {
    const response = await fetch(form.action, { method: "POST", body, credentials: "same-origin", headers: { "x-grove-enhanced": "1" } })
    const page = new DOMParser().parseFromString(await response.text(), "text/html")
    const main = page.querySelector("main")
    if (main !== null) {
      document.querySelector("main")?.replaceWith(document.adoptNode(main))
      if (response.redirected) history.replaceState(null, "", response.url)
      document.title = page.title
      document.querySelector("main [role=alert], main h1")?.setAttribute("tabindex", "-1")
      document.querySelector("main [role=alert], main h1")?.focus()
    }
  } catch {
    form.submit()
  }
})

// ---- CI run page (ci/CiPages.ts): the log follows the run live over server-sent events. ----
// The page already shows what was logged; the events continue after it (data-ci-events says where). Lines and
// state badges come rendered by the server (escaped, colours as classes): this only inserts them.
const ciRun = document.querySelector("[data-ci-events]")
if (ciRun !== null && typeof EventSource === "function") {
  const events = new EventSource(ciRun.getAttribute("data-ci-events"))
  events.addEventListener("log", (event) => {
    const data = JSON.parse(event.data)
    const log = document.getElementById(`ci-log-${data.step_id}`)
    if (log === null) return
    const following = log.scrollTop + log.clientHeight >= log.scrollHeight - 4
    log.insertAdjacentHTML("beforeend", data.html)
    if (following) log.scrollTop = log.scrollHeight
  })
  events.addEventListener("step", (event) => {
    const data = JSON.parse(event.data)
    const badge = document.getElementById(`ci-step-state-${data.step_id}`)
    if (badge !== null) badge.outerHTML = data.html
    if (data.status === "running") document.getElementById(`ci-step-${data.step_id}`)?.setAttribute("open", "")
  })
  // The run ended: show it as the server now does (states, durations, Re-run in place of Cancel).
  events.addEventListener("end", async () => {
    events.close()
    try {
      const page = new DOMParser().parseFromString(await (await fetch(location.href, { credentials: "same-origin" })).text(), "text/html")
      const fresh = page.querySelector(".ci-run")
      if (fresh !== null) document.querySelector(".ci-run")?.replaceWith(document.adoptNode(fresh))
    } catch {
      // The page as it is stays readable; a reload shows the end.
    }
  })
}
