import * as DbEmbedded from "../src/DbEmbedded.ts"
import { dbContract } from "./Db.contract.ts"

dbContract("embedded PGlite", DbEmbedded.layer({}))
