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
  return {
    kind: 'pglite',
    query: (sql, params) => run(db, sql, params),
    exec: async (sql) => {
      await db.exec(sql)
    },
    transaction<T>(fn: (tx: Tx) => Promise<T>): Promise<T> {
      return db.transaction(async (t) => {
        const result = await fn({
          query: (sql, params) => run(t, sql, params),
          exec: async (sql) => {
            await t.exec(sql)
          },
          serialized: true,
        })
        return result
      })
    },
    close: () => db.close(),
  }
}
