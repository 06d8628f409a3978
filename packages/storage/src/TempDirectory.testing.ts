/**
 * A temporary directory for one test file, made when the file loads and removed after its last test (vitest's
 * afterAll at the file's top level runs after every suite's own, so a layer's finalizers have run by then). Test
 * files made object-store roots with mkdtempSync and never removed them: every run of the suite left ~150 MB in /tmp.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll } from "vitest"

export const tempDirectory = (prefix: string): string => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix))
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }))
  return dir
}
