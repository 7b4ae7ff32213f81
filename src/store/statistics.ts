import type { Queryable } from './store.ts'

/**
 * Planner statistics for tables that grow in bulk.
 *
 * Foreign-key checks run as plans that each connection prepares once and keeps until the referenced table's
 * statistics change. A plan made while a table was a page or two (just migrated, or analyzed by autovacuum's
 * first pass at 50 rows) scans the whole table for each key; kept while the table grows to a million rows,
 * every insert that checks a key reads the whole table, and a bulk load slows down without end (measured:
 * docs/performance.md, "1,000,000 Receivables"). Autovacuum replans them only when it next analyzes, at most
 * once a minute and never when it is off; so the batch runner, which is what makes tables grow fast, analyzes
 * every table whose live rows have at least doubled since its last analyze (and number at least `minRows`).
 * Growth, not changes: small tables rewritten all the time (request slots, rate windows, feed heads) do not
 * need it. From a table of a few thousand rows on, a replanned check is an index lookup; doubling bounds the
 * analyses to about 20 per table over its life. ANALYZE samples a fixed number of rows (about 100 ms on a
 * million). PGlite keeps no such counters, and nothing analyzes its tables small, so this finds nothing there.
 */
export async function analyzeGrownTables(db: Queryable, minRows = 1000): Promise<string[]> {
  const grown = await db.query<{ relname: string }>(
    `SELECT s.relname FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
      WHERE s.schemaname = current_schema() AND s.n_live_tup >= greatest($1::float8, 2 * c.reltuples)
      ORDER BY s.relname`,
    [minRows],
  )
  const names = grown.map((g) => g.relname)
  // SKIP_LOCKED: a table another session (autovacuum, another instance) is analyzing right now is left to it.
  for (const name of names) await db.query(`ANALYZE (SKIP_LOCKED) "${name.replaceAll('"', '""')}"`)
  return names
}
