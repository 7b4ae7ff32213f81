import type { NewestFirstKey } from '../domain/cursor.ts'

/**
 * The SQL of a newest-first list (docs/decisions.md, "Lists"), on a creation-time column and an identifier column
 * that never change once a row exists: the order, the condition that starts a page strictly after a cursor's key,
 * and `list_at`, the creation time as the cursor carries it (microseconds, so the key compares exactly whatever
 * precision the column holds). Every list's index is (client_code, [filter,] created, id): the condition is a row
 * comparison on the index's trailing columns, so a page is one backward index range scan (docs/performance.md).
 *
 * `params` is the statement's parameter list: the cursor's two values are appended to it.
 */
export function newestFirst(at: string, id: string, after: NewestFirstKey | undefined, params: unknown[]) {
  let where = ''
  if (after) {
    params.push(after.at, after.id)
    where = ` AND (${at}, ${id}) < ($${params.length - 1}::timestamptz, $${params.length}::text)`
  }
  return {
    /** `AND (at, id) < (cursor)`, or nothing on the first page. */
    where,
    order: `ORDER BY ${at} DESC, ${id} DESC`,
    listAt: `to_char(${at} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS list_at`,
  }
}
