/**
 * Keyset pagination in SQL, shared by the read services: a list is ordered by its sort key plus a
 * unique column, a page is `WHERE (key, id) > cursor ... LIMIT limit + 1` (the extra row says
 * whether a next page exists), so the database never returns more than one page and a row added or
 * removed between two requests neither repeats nor skips the others.
 *
 * A key is the row's sort values as the database compares them (timestamps as `::text`, with
 * their microseconds, so a cursor names exactly one position).
 */
import type { SqlClient } from "effect/sql"
import type { Fragment } from "effect/sql/Statement"

export type KeyPart = string | boolean

/** What one request asks of a list. */
export interface PageRequest {
  /** Rows of the page (the query fetches one more). */
  readonly limit: number
  /** The key of the last row of the previous page; none for the first page. */
  readonly after?: ReadonlyArray<KeyPart> | undefined
}

/** A row and its key (for the next page's cursor). */
export interface Keyed<A> {
  readonly row: A
  readonly key: ReadonlyArray<KeyPart>
}

export interface KeyColumn {
  /** The SQL expression compared and ordered by. */
  readonly expr: Fragment
  readonly descending?: boolean
  /** The cursor value's SQL type, when it is not text (`timestamptz`, `uuid`, `boolean`). */
  readonly cast?: "timestamptz" | "uuid" | "boolean"
  /** How the key part is read out, when not `expr` itself (`t.created_at::text`: microseconds kept). */
  readonly read?: Fragment
}

const castValue = (sql: SqlClient.SqlClient, column: KeyColumn, value: KeyPart): Fragment =>
  column.cast === undefined ? sql`${value}` : sql`CAST(${typeof value === "boolean" ? String(value) : value} AS ${sql.literal(column.cast)})`

/** `ORDER BY` the key columns. */
export const orderBy = (sql: SqlClient.SqlClient, columns: ReadonlyArray<KeyColumn>): Fragment =>
  sql`ORDER BY ${sql.csv(columns.map((c) => c.descending === true ? sql`${c.expr} DESC` : sql`${c.expr} ASC`))}`

/**
 * The rows after `after` in the order of `columns`, as a condition (`true` without a cursor):
 * `c1 > v1 OR (c1 = v1 AND (c2 > v2 OR ...))`, with `<` for descending columns.
 */
export const after = (
  sql: SqlClient.SqlClient,
  columns: ReadonlyArray<KeyColumn>,
  values: ReadonlyArray<KeyPart> | undefined
): Fragment => {
  if (values === undefined) return sql`true`
  const from = (i: number): Fragment => {
    const column = columns[i]!
    const value = castValue(sql, column, values[i]!)
    const beyond = column.descending === true ? sql`${column.expr} < ${value}` : sql`${column.expr} > ${value}`
    return i === columns.length - 1 ? beyond : sql`(${beyond} OR (${column.expr} = ${value} AND ${from(i + 1)}))`
  }
  return from(0)
}

/** `, <read> AS "key0", ...`: the key columns selected beside a row's own (`keyed` takes them out again). */
export const selectKeys = (sql: SqlClient.SqlClient, columns: ReadonlyArray<KeyColumn>): Fragment =>
  sql`, ${sql.csv(columns.map((c, i) => sql`${c.read ?? c.expr} AS ${sql.literal(`"key${i}"`)}`))}`

/** Rows selected with `selectKeys`, as rows (without the key columns) and their keys. */
export const keyed = <A>(rows: ReadonlyArray<A>, columns: ReadonlyArray<KeyColumn>): ReadonlyArray<Keyed<A>> =>
  rows.map((selected) => {
    const row: Record<string, unknown> = { ...(selected as object) }
    const key = columns.map((_, i) => {
      const value = row[`key${i}`]
      delete row[`key${i}`]
      return typeof value === "boolean" ? value : String(value)
    })
    return { row: row as unknown as A, key }
  })

/** `LIMIT limit + 1`. */
export const limitPlusOne = (sql: SqlClient.SqlClient, page: PageRequest): Fragment => sql`LIMIT ${page.limit + 1}`
