// Types of ./bundle.js (plain JavaScript: the bin runs it before anything else loads).
export declare const BUNDLE_DIR: URL
export declare const ENTRY: string
export declare const MANIFEST: string
/** What `MANIFEST` holds: the inputs' paths from the repository's root; `sealed`: not compared with them. */
export interface Manifest {
  readonly inputs: ReadonlyArray<string>
  readonly sealed?: boolean
}
export declare const newestInput: (dir?: URL) => number
export declare const bundleIsFresh: (dir?: URL) => boolean
