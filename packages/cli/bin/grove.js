#!/usr/bin/env node
// The `grove` command. This file only checks the Node version, in syntax any Node parses (no
// static import, no top-level await), so an older Node prints what it needs instead of a
// SyntaxError from the code that follows; ./start.js is the client.
var version = process.versions.node.split(".").map(Number)
if (version[0] < 24 || (version[0] === 24 && version[1] < 6)) {
  process.stderr.write(
    "grove needs Node 24.6 or newer; this is " + version[0] + ".x (" + process.version + ", " + process.execPath + ").\n" +
      "Put a newer Node first on the PATH: a Grove checkout has one after npm install, in node_modules/.bin.\n"
  )
  process.exit(1)
}
import("./start.js").catch(function(error) {
  process.stderr.write((error && error.stack ? error.stack : String(error)) + "\n")
  process.exitCode = 1
})
