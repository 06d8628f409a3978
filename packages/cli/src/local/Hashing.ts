/** BLAKE3 of files, read whole when small and streamed when large (bounded memory). */
import { Objects } from "@grove/core"
import { createReadStream } from "node:fs"
import * as fs from "node:fs/promises"

const WHOLE_FILE_LIMIT = 8 * 1024 * 1024

export const hashFile = async (file: string, size?: number): Promise<string> => {
  const known = size ?? (await fs.stat(file)).size
  if (known <= WHOLE_FILE_LIMIT) return Objects.Blake3.hash(await fs.readFile(file))
  const hasher = await Objects.Blake3.backend.makeHasher()
  for await (const piece of createReadStream(file, { highWaterMark: 1024 * 1024 })) hasher.update(piece as Buffer)
  return hasher.digest()
}
