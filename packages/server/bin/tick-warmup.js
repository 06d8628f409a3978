// Node's `process.nextTick` runs about five times for each request node:http answers (the socket write's
// callback, the response's finish and close, the request's end and destroy), and V8 compiles it once, from
// what its calls looked like until then. Compiled after the server's start (many callers, many kinds of
// tick), it made each tick object through the runtime (its literal has computed keys): ~0.7 µs per tick for
// the life of the process. Found with `perf` on the hot reads: a bare node:http handler inside the server's
// process cost 22.4 µs of CPU per request, 16.6 µs in a process of its own.
//
// Called hot first, before anything else runs, nextTick is compiled for a plain tick, which is what node's
// own callers make. Measured on the hot reads (`GET /api/{o}/{n}`, bundles in turns, 5 rounds, load 17):
// 32.6 -> 26.5 µs of server CPU per request. Warming it later, once the server's modules had loaded (in
// Server.ts), made it worse (30.8 -> 50 µs): it has to be here. The ticks are real, empty ones.
//
// Looked at again (s12, R): the cost shows after a first boot (fresh data directory), not after a restart
// (autocannon c=64, CPU per request: restart 33/37 µs without vs 37/36 with; first boot 36/40 vs 30/33). The slow
// tick was nextTick running Maglev code, which makes the tick literal through the runtime (a micro benchmark:
// 911 ns a tick with Maglev only, 241 with TurboFan); perf of a first-booted server without the warm-up showed
// most JS in Maglev (13% of samples vs 1% TurboFan; with it 0.8% vs 17.7%). The warm-up's own optimized code
// does not survive the start (deoptimized by map and allocation-site changes); why it changes later tiering is
// not known. GROVE_TICK_WARMUP=0 (grove-server.js) leaves it out to measure it.
const ROUNDS = 4
const TICKS = 20_000
const nothing = () => {}

/** Queues TICKS empty ticks ROUNDS times, each round drained before the next. */
export const warmNextTick = async () => {
  for (let round = 0; round < ROUNDS; round++) {
    for (let i = 0; i < TICKS; i++) process.nextTick(nothing)
    await new Promise((resolve) => setImmediate(resolve))
  }
}
