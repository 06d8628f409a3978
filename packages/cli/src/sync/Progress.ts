/**
 * A progress bar on stderr for transfers that last more than a second, only
 * when stderr is a terminal: a pipe or a file gets nothing.
 */

export interface Progress {
  readonly add: (bytes: number) => void
  readonly done: () => void
}

const DELAY_MS = 1000
const REDRAW_MS = 100

const mib = (bytes: number) => (bytes / (1024 * 1024)).toFixed(1)

export const makeProgress = (
  label: string,
  total: number,
  stream: { readonly isTTY?: boolean; readonly columns?: number; write: (text: string) => unknown } = process.stderr
): Progress => {
  if (stream.isTTY !== true || total <= 0) return { add: () => {}, done: () => {} }
  const started = Date.now()
  let sent = 0
  let drawn = 0
  let visible = false
  const draw = () => {
    const now = Date.now()
    if (now - started < DELAY_MS || now - drawn < REDRAW_MS) return
    drawn = now
    visible = true
    const fraction = Math.min(1, sent / total)
    const width = 30
    const full = Math.round(fraction * width)
    const rate = sent / Math.max(0.001, (now - started) / 1000)
    stream.write(
      `\r${label} [${"#".repeat(full)}${"-".repeat(width - full)}] ${Math.floor(fraction * 100)}% ${mib(sent)}/${mib(total)} MiB ${mib(rate)} MiB/s`
    )
  }
  return {
    add: (bytes) => {
      sent += bytes
      draw()
    },
    done: () => {
      if (visible) stream.write("\r\x1b[2K")
    }
  }
}
