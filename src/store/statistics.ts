import type { Store } from './store.ts'

/**
 * Planner statistics for tables that grow in bulk.
 *
 * A connection keeps the plan of each statement it prepared, and of each foreign-key check, until a table it reads
 * is next analyzed. A plan made while a table was a page or two (just migrated, or analyzed by autovacuum's first pass
 * at 50 rows) prices a client's rows at two or three: a foreign-key check then scans the whole table for each key, an
 * `UPDATE … FROM` a list hash-joins every row of the client, and kept while the table grows to a million rows, every
 * such statement reads them all, and a bulk load slows down without end (measured: docs/performance.md, "1,000,000
 * Receivables"; docs/decisions.md, "Reads by many identifiers probe the key per identifier"). Autovacuum replans them
 * only when it next analyzes, at most once a minute and never when it is off, and PGlite has no autovacuum at all; so
 * the batch runner, which is what makes tables grow fast, analyzes every table that has at least doubled since its last
 * analyze. Growth, not changes: small tables rewritten all the time (request slots, rate windows, feed heads) do not need
 * it. From a table of a few thousand rows on, a replanned statement probes keys; doubling bounds the analyses to about
 * 20 per table over its life. ANALYZE samples a fixed number of rows (about 100 ms on a million).
 *
 * How growth is seen is the store's: PostgreSQL counts live rows (`pg_stat_user_tables.n_live_tup`, at least
 * `minRows`, against the rows of the last analyze); PGlite keeps no such counters (one backend, no statistics
 * collector), so there the table's pages now (`pg_relation_size`) are compared with its pages at the last analyze
 * (`pg_class.relpages`, 0 before the first), from MIN_PAGES on.
 */
export async function analyzeGrownTables(store: Pick<Store, 'kind' | 'query'>, minRows = 1000): Promise<string[]> {
  const grown =
    store.kind === 'postgres'
      ? await store.query<{ relname: string }>(
          `SELECT s.relname FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
            WHERE s.schemaname = current_schema() AND s.n_live_tup >= greatest($1::float8, 2 * c.reltuples)
            ORDER BY s.relname`,
          [minRows],
        )
      : await store.query<{ relname: string }>(
          `SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = current_schema() AND c.relkind = 'r'
              AND pg_relation_size(c.oid) / current_setting('block_size')::int >= greatest($1::int, 2 * c.relpages)
            ORDER BY c.relname`,
          [MIN_PAGES],
        )
  const names = grown.map((g) => g.relname)
  // SKIP_LOCKED: a table another session (autovacuum, another instance) is analyzing right now is left to it.
  for (const name of names) await store.query(`ANALYZE (SKIP_LOCKED) "${name.replaceAll('"', '""')}"`)
  return names
}

/** PGlite: the pages (8 KiB each) a table holds before its growth is looked at, about a thousand small rows. */
export const MIN_PAGES = 16
