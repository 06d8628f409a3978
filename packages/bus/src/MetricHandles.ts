/**
 * Pre-created metric series for hot paths. Effect's `Metric` keys a series by its name and attributes;
 * a series made once per label set (and kept here) costs one Map lookup per update, where
 * `Metric.withAttributes` on every call would allocate. Updates go to the process-wide default
 * registry, which `/metrics` serializes.
 */
import { Context, Metric } from "effect"

/** The context `updateUnsafe` reads the registry from: the default one. */
export const DEFAULT_CONTEXT: Context.Context<never> = Context.empty()

/** Seconds: 1 ms to 60 s. */
export const LATENCY_BOUNDARIES = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60]

/** A cache of series of one metric, one per label set, keyed by a string the caller builds. */
export const series = <M>(make: (attributes: Record<string, string>) => M) => {
  const made = new Map<string, M>()
  return (key: string, attributes: () => Record<string, string>): M => {
    let metric = made.get(key)
    if (metric === undefined) {
      metric = make(attributes())
      made.set(key, metric)
    }
    return metric
  }
}

export const counterSeries = (name: string, description: string) =>
  series((attributes) => Metric.counter(name, { description, attributes, incremental: true }))

export const histogramSeries = (name: string, description: string, boundaries: ReadonlyArray<number> = LATENCY_BOUNDARIES) =>
  series((attributes) => Metric.histogram(name, { description, attributes, boundaries }))

export const gaugeSeries = (name: string, description: string) =>
  series((attributes) => Metric.gauge(name, { description, attributes }))
