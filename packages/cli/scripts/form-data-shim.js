/**
 * Injected into the client's bundle (scripts/bundle.ts) in place of the global `FormData`. effect's typed client
 * asks `payload instanceof FormData` before every request with a body, and the first touch of the global loads
 * undici (fetch's implementation: ~70 ms of a one-file push's CPU) although the client sends no forms and talks
 * node:http (src/sync/HttpTransport.ts). A FormData can only exist once something made one, which loaded undici.
 */
export class FormData {
  constructor(...args) {
    return new globalThis.FormData(...args)
  }

  static [Symbol.hasInstance](value) {
    return typeof value === "object" && value !== null && Object.prototype.toString.call(value) === "[object FormData]"
  }
}
