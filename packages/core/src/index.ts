export * as Access from "./Access.ts"
export * as Names from "./Names.ts"
export * as Objects from "./objects/index.ts"
export * as FastCdc from "./chunking/FastCdc.ts"
