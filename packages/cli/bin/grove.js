#!/usr/bin/env node
// The Grove command-line client. Node 24 runs the TypeScript sources directly;
// the compile cache keeps start-up fast after the first run.
import { enableCompileCache } from "node:module"

enableCompileCache?.()
await import("../src/main.ts")
