import { randomBytes } from 'node:crypto'
import pg from 'pg'
import type { DatabaseLayout } from '../../src/store/layout.ts'
import { migrate } from '../../src/store/migrate.ts'
import { openPglite } from '../../src/store/pglite.ts'
import { openPostgres } from '../../src/store/postgres.ts'
import type { Store } from '../../src/store/store.ts'
import { recordForAuditFile } from './statement-audit.ts'

export const onPostgres = Boolean(process.env.DATABASE_URL)
export const engineName = onPostgres ? 'postgres' : 'pglite'
/**
 * The layout every test database is migrated to: DATABASE_LAYOUT=partitioned (CI runs the suite so once) makes
 * every client-keyed table hash-partitioned by client_code (src/store/layout.ts, docs/scaling.md).
 */
export const testLayout: DatabaseLayout = process.env.DATABASE_LAYOUT === 'partitioned' ? 'partitioned' : 'plain'

export interface TestDatabase {
  store: Store
  /** Connection string of this test's own database (PostgreSQL only), for child processes and second instances. */
  url?: string
  open(): Store
  drop(): Promise<void>
}

function withDatabase(url: string, database: string): string {
  const u = new URL(url)
  u.pathname = `/${database}`
  return u.toString()
}

/**
 * A fresh, migrated database for one test file: in-memory PGlite, or a new database on the PostgreSQL
 * server of DATABASE_URL (dropped afterwards). Never an in-memory fake.
 */
export async function createTestDatabase(opts: { layout?: DatabaseLayout } = {}): Promise<TestDatabase> {
  const layout = opts.layout ?? testLayout
  const base = process.env.DATABASE_URL
  if (!base) {
    const store = await openPglite()
    await migrate(store, { layout })
    recordForAuditFile(store)
    return {
      store,
      open: () => {
        throw new Error('a second connection needs PostgreSQL')
      },
      drop: () => store.close(),
    }
  }
  const name = `irs_t_${randomBytes(6).toString('hex')}`
  const admin = new pg.Client({ connectionString: base })
  await admin.connect()
  await admin.query(`CREATE DATABASE ${name}`)
  await admin.end()
  const url = withDatabase(base, name)
  const store = openPostgres(url)
  await migrate(store, { layout })
  recordForAuditFile(store)
  const extra: Store[] = []
  return {
    store,
    url,
    open: () => {
      const s = openPostgres(url)
      recordForAuditFile(s)
      extra.push(s)
      return s
    },
    async drop() {
      await Promise.allSettled([store.close(), ...extra.map((s) => s.close())])
      const c = new pg.Client({ connectionString: base })
      await c.connect()
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
      await c.end()
    },
  }
}

/**
 * An empty database of the engine under test loaded with a SQL dump, NOT migrated: the upgrade tests load a
 * database an older main wrote (test/fixtures/upgrade-from-20eeacf.sql) and then run `migrate` on it.
 */
export async function loadDumpDatabase(dump: string): Promise<TestDatabase> {
  const base = process.env.DATABASE_URL
  if (!base) {
    const store = await openPglite()
    await store.exec(dump)
    await store.query(`SELECT pg_catalog.set_config('search_path', 'public', false)`)
    return {
      store,
      open: () => {
        throw new Error('a second connection needs PostgreSQL')
      },
      drop: () => store.close(),
    }
  }
  const name = `irs_t_${randomBytes(6).toString('hex')}`
  const admin = new pg.Client({ connectionString: base })
  await admin.connect()
  await admin.query(`CREATE DATABASE ${name}`)
  await admin.end()
  const url = withDatabase(base, name)
  const loader = new pg.Client({ connectionString: url })
  await loader.connect()
  await loader.query(dump)
  await loader.end()
  const store = openPostgres(url)
  return {
    store,
    url,
    open: () => {
      throw new Error('a loaded dump is read through its one store')
    },
    async drop() {
      await store.close()
      const c = new pg.Client({ connectionString: base })
      await c.connect()
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
      await c.end()
    },
  }
}
