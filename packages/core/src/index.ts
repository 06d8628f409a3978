export * as Access from "./Access.ts"
export * as Names from "./Names.ts"
