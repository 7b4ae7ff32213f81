import pg from 'pg'
import { commitHooks, normalizeRow, type Store, type Tx } from './store.ts'

export function openPostgres(connectionString: string, opts: { max?: number } = {}): Store {
  const pool = new pg.Pool({ connectionString, max: opts.max ?? 10 })
  // An idle client that errors (server restart) must not crash the process; the next query reconnects.
  pool.on('error', () => {})
  const run = async <T extends object>(c: pg.Pool | pg.PoolClient, sql: string, params?: readonly unknown[]) => {
    const res = await c.query(sql, params as unknown[] | undefined)
    return res.rows.map((r) => normalizeRow<T>(r))
  }
  return {
    kind: 'postgres',
    query: (sql, params) => run(pool, sql, params),
    exec: async (sql) => {
      await pool.query(sql)
    },
    async transaction<T>(fn: (tx: Tx) => Promise<T>): Promise<T> {
      const client = await pool.connect()
      let broken = false
      try {
        await client.query('BEGIN')
        const hooks = commitHooks()
        const result = await fn({
          query: (sql, params) => run(client, sql, params),
          exec: async (sql) => {
            await client.query(sql)
          },
          beforeCommit: (hook, phase) => hooks.add(hook, phase),
          serialized: false,
        })
        await hooks.run()
        await client.query('COMMIT')
        return result
      } catch (err) {
        try {
          await client.query('ROLLBACK')
        } catch {
          broken = true
        }
        throw err
      } finally {
        client.release(broken)
      }
    },
    close: () => pool.end(),
  }
}
