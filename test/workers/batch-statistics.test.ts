import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import pg from 'pg'
import { systemClock } from '../../src/domain/time.ts'
import type { OperationsByKind } from '../../src/resources/batches/service.ts'
import { analyzeGrownTables } from '../../src/store/statistics.ts'
import { createBatchRunner } from '../../src/workers/batch-runner.ts'
import { waitFor } from '../helpers/batch-process.ts'
import { createTestDatabase, onPostgres, type TestDatabase, testLayout } from '../helpers/store.ts'

/**
 * The foreign-key plan problem after bulk growth (src/store/statistics.ts): a connection that checked a
 * foreign key while the referenced table was small, after the table had been analyzed small, keeps a plan
 * that scans the whole table for every key. The batch runner analyzes the tables that doubled; from then on
 * the same connection checks keys with the index.
 */
let db: TestDatabase

/**
 * The table a client's Receivables are in: `receivables`, or on the partitioned layout (DATABASE_LAYOUT, docs/scaling.md)
 * the partition of that client, which has the statistics and the counters (a partitioned table has neither).
 */
async function receivablesOf(client: string): Promise<string> {
  if (testLayout !== 'partitioned') return 'receivables'
  const [row] = await db.store.query<{ rel: string }>(
    `SELECT tableoid::regclass::text AS rel FROM receivables WHERE client_code = $1 LIMIT 1`,
    [client],
  )
  assert.ok(row, `a Receivable of ${client}`)
  return row.rel
}

before(async () => {
  db = await createTestDatabase()
})
after(() => db.drop())

/** Receivables r<from> to r<to> of a client (`stats` unless named). */
const receivablesInsert = (from: number, to: number, client = 'stats') =>
  `INSERT INTO receivables (client_code, external_receivable_id, revision, status, source_revision, currency, source_amount_minor, representation, created_at, updated_at)
   SELECT '${client}', 'r' || g, 1, 'active', 1, 'USD', 1000, '{}'::jsonb, now(), now() FROM generate_series(${from}, ${to}) g`
const linksInsert = (from: number, to: number) =>
  `INSERT INTO receivable_customers SELECT 'stats', 'c', 'r' || g, 'primary' FROM generate_series(${from}, ${to}) g`

describe('statistics of grown tables', () => {
  test('nothing to analyze in a database that did not grow', async () => {
    assert.deepEqual(await analyzeGrownTables(db.store), [])
  })

  test('a table that doubled is analyzed, and a kept foreign-key plan turns from whole-table scans to index lookups', {
    skip: onPostgres
      ? false
      : 'PGlite keeps no per-table change counters (pg_stat_user_tables stays at 0) and checks foreign keys in its one backend; its growth is seen by pages (below)',
  }, async () => {
    await db.store.query(`INSERT INTO clients (client_code, name, created_at, updated_at) VALUES ('stats', 'stats', now(), now())`)
    // As autovacuum's first pass or an operator's ANALYZE of a fresh database would leave it: analyzed small.
    await db.store.query('ANALYZE receivables')
    await db.store.query(receivablesInsert(1, 20))
    const rel = await receivablesOf('stats')
    // One long-lived connection, as a pool's: it checks foreign keys while the table is small.
    const session = new pg.Client({ connectionString: db.url as string })
    await session.connect()
    try {
      for (let i = 1; i <= 8; i++) await session.query(linksInsert(i, i))
      await db.store.query(receivablesInsert(21, 20_000))
      // How the session's key checks of one statement read receivables: whole-table scans or index lookups.
      const scans = async (from: number, to: number) => {
        const counters = async () =>
          (await session.query(`SELECT seq_scan::int AS seq, idx_scan::int AS idx FROM pg_stat_xact_user_tables WHERE relname = $1`, [rel]))
            .rows[0] as { seq: number; idx: number }
        await session.query('BEGIN')
        const before = await counters()
        await session.query(linksInsert(from, to))
        const after = await counters()
        await session.query('COMMIT')
        return { seq: after.seq - before.seq, idx: after.idx - before.idx }
      }
      // Every one of 200 key checks scans the table.
      assert.deepEqual(await scans(101, 300), { seq: 200, idx: 0 })
      // The change counters reach the statistics views within a second or so.
      const analyzed = await waitFor('receivables to count as grown', async () => {
        const names = await analyzeGrownTables(db.store)
        return names.includes(rel) ? names : undefined
      })
      assert.ok(analyzed.includes(rel))
      const [stats] = await db.store.query<{ reltuples: number }>(`SELECT reltuples FROM pg_class WHERE relname = $1`, [rel])
      assert.equal(Number(stats?.reltuples), 20_000)
      // The same connection, the same statement: index lookups now.
      assert.deepEqual(await scans(301, 500), { seq: 0, idx: 200 })
      // Nothing doubled since: nothing more to analyze.
      assert.equal((await analyzeGrownTables(db.store)).includes(rel), false)
    } finally {
      await session.end()
    }
  })

  test('PGlite: a table whose pages doubled is analyzed, and a kept UPDATE joined on the key turns from a hash join over the client to key probes', {
    skip: onPostgres ? 'PostgreSQL counts rows (the test above)' : false,
  }, async () => {
    await db.store.query(
      `INSERT INTO clients (client_code, name, created_at, updated_at) VALUES ('stats-pages', 'stats-pages', now(), now())`,
    )
    const insert = (from: number, to: number) => db.store.query(receivablesInsert(from, to, 'stats-pages'))
    await insert(1, 40)
    // One statement of the write path's shape (an adjustment's move of its Receivables), prepared and planned
    // generic while the client has 40 rows: kept by the one backend until receivables is analyzed.
    await db.store.query(
      `PREPARE move(text, text[]) AS UPDATE receivables r SET revision = r.revision + 1
         FROM unnest($2::text[]) AS i(id) WHERE r.client_code = $1 AND r.external_receivable_id = i.id`,
    )
    await db.store.query('SET plan_cache_mode = force_generic_plan')
    const plan = async () => {
      const rows = await db.store.query<{ 'QUERY PLAN': string }>(`EXPLAIN (COSTS OFF) EXECUTE move('stats-pages', '{r1,r2}')`)
      const text = rows.map((r) => r['QUERY PLAN']).join('\n')
      return ['Hash Join', 'Nested Loop'].filter((join) => text.includes(join))
    }
    try {
      assert.deepEqual(await plan(), ['Hash Join'])
      await insert(41, 5000)
      assert.deepEqual(await plan(), ['Hash Join'], 'kept while the client grew to 5,000 rows')
      const names = await analyzeGrownTables(db.store)
      assert.ok(names.includes('receivables'), names.join(', '))
      assert.deepEqual(await plan(), ['Nested Loop'])
      // Its pages are those of the last analyze now: nothing doubled since.
      assert.equal((await analyzeGrownTables(db.store)).includes('receivables'), false)
    } finally {
      await db.store.query('RESET plan_cache_mode')
      await db.store.query('DEALLOCATE move')
    }
  })

  test('payload columns are left out of the statistics an ANALYZE computes (migration 0053)', async () => {
    await db.store.query(
      `INSERT INTO clients (client_code, name, created_at, updated_at) VALUES ('stats-cols', 'stats-cols', now(), now())`,
    )
    await db.store.query(
      `INSERT INTO receivables (client_code, external_receivable_id, revision, status, source_revision, currency, source_amount_minor, representation, created_at, updated_at)
       SELECT 'stats-cols', 'r' || g, 1, 'active', 1, 'USD', 1000, jsonb_build_object('n', g), now(), now() FROM generate_series(1, 200) g`,
    )
    const rel = await receivablesOf('stats-cols')
    await db.store.query(`ANALYZE ${rel}`)
    const columns = await db.store.query<{ attname: string }>(
      `SELECT attname FROM pg_stats WHERE tablename = $1 AND attname IN ('client_code', 'external_receivable_id', 'representation') ORDER BY attname`,
      [rel],
    )
    assert.deepEqual(
      columns.map((c) => c.attname),
      ['client_code', 'external_receivable_id'],
    )
  })

  test('a running runner analyzes grown tables even when no batch has a second chunk', async () => {
    // A bulk load of batches of at most BATCH_CHUNK_SIZE records (the default and the largest batch) runs every
    // batch as one chunk: there is no "between chunks". The 1M ingest met it: 2 billion rows read by foreign-key
    // checks planned on the empty tables, and records/s falling by a fifth per 100,000. The worker loop checks too.
    const runner = createBatchRunner({
      store: db.store,
      clock: systemClock,
      // No batch is queued: the runner only polls, so it never needs an operation.
      operations: {} as OperationsByKind,
      pollMs: 20,
      analyzeEveryMs: 50,
    })
    await db.store.query(
      `INSERT INTO clients (client_code, name, created_at, updated_at) VALUES ('stats-loop', 'stats-loop', now(), now())`,
    )
    const insert = (from: number, to: number) => db.store.query(receivablesInsert(from, to, 'stats-loop'))
    await insert(1, 1)
    const rel = await receivablesOf('stats-loop')
    const reltuples = async () =>
      Number((await db.store.query<{ n: number }>(`SELECT reltuples AS n FROM pg_class WHERE relname = $1`, [rel]))[0]?.n)
    const before = await reltuples()
    await insert(2, 50000)
    const [{ rows } = { rows: 0 }] = await db.store.query<{ rows: number }>(`SELECT count(*)::int AS rows FROM ${rel}`)
    runner.start()
    try {
      // Analyzed by the runner alone: reltuples becomes the table's row count (estimated from ANALYZE's sample of
      // 30,000 rows once the table is larger, hence within a tenth rather than exact).
      await waitFor('the idle runner to analyze receivables', async () => ((await reltuples()) >= rows * 0.9 ? true : undefined))
      assert.ok(before < rows / 2, `receivables was analyzed small before (${before} of ${rows} rows)`)
    } finally {
      await runner.stop()
    }
  })
})
