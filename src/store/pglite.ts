import { PGlite, types } from '@electric-sql/pglite'
import { normalizeRow, type Row, type Store, type Tx } from './store.ts'

/**
 * The embedded engine. PGlite is one Postgres backend in-process: it runs one query at a time and a
 * transaction excludes every other query until it ends, so requests on this store are serialized.
 * `dataDir` undefined means in-memory (tests).
 */
export async function openPglite(dataDir?: string): Promise<Store> {
  const db = await PGlite.create({
    ...(dataDir ? { dataDir } : {}),
    // int8 as text so money in minor units and sequence numbers stay exact.
    parsers: { [types.INT8]: (v: string) => v },
  })
  const run = async <T extends object>(q: Pick<PGlite, 'query'>, sql: string, params?: readonly unknown[]) => {
    const res = await q.query<Row>(sql, params as unknown[] | undefined)
    return res.rows.map((r) => normalizeRow<T>(r))
  }
  /**
   * Calls on the store not yet finished (a statement, or a whole transaction): the first holds the one
   * backend, the rest wait behind it (PGlite queues them itself). Statements inside a transaction run on its
   * connection and are not counted again. Only for `poolStats`.
   */
  let inFlight = 0
  const counted = async <T>(work: () => Promise<T>): Promise<T> => {
    inFlight++
    try {
      return await work()
    } finally {
      inFlight--
    }
  }
  return {
    kind: 'pglite',
    query: (sql, params) => counted(() => run(db, sql, params)),
    exec: (sql) =>
      counted(async () => {
        await db.exec(sql)
      }),
    poolStats: () => ({ max: 1, total: 1, idle: inFlight === 0 ? 1 : 0, waiting: Math.max(0, inFlight - 1) }),
    transaction<T>(fn: (tx: Tx) => Promise<T>): Promise<T> {
      return counted(() =>
        db.transaction(async (t) => {
          const result = await fn({
            query: (sql, params) => run(t, sql, params),
            exec: async (sql) => {
              await t.exec(sql)
            },
            serialized: true,
          })
          return result
        }),
      )
    },
    close: () => db.close(),
  }
}
