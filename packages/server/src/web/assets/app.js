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
