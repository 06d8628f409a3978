// Types of ./bundle.js (plain JavaScript: the bin runs it before anything else loads).
export declare const BUNDLE_DIR: URL
export declare const ENTRY: string
export declare const newestInput: () => number
export declare const bundleIsFresh: (dir?: URL) => boolean
