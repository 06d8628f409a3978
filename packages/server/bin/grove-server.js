#!/usr/bin/env node
// The Grove server. Node 24 runs the TypeScript sources directly.
import "../src/main.ts"
