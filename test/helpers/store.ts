import { createHash, randomBytes } from 'node:crypto'
import { readFileSync } from 'node:fs'
import pg from 'pg'
import type { DatabaseLayout } from '../../src/store/layout.ts'
import { listDefinitions, listMigrations, migrate } from '../../src/store/migrate.ts'
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
 * The partitioned layout's conversion (src/store/layout.ts) costs a PostgreSQL database about 12 s more than the
 * migrations alone (2.4 s plain, 14.1 to 14.7 s partitioned, measured under load): paid once per schema, in a
 * template database named by the digest of the migrations, the definitions and the conversion, which each test
 * file's database copies (CREATE DATABASE ... TEMPLATE). Built and copied under an advisory lock of the server's
 * admin connection, so test processes starting at once build it once and never copy it while it is in use. The
 * template stays on the server for the next run of the same schema.
 */
async function copyPartitionedTemplate(admin: pg.Client, base: string, name: string): Promise<void> {
  const hash = createHash('sha256')
  for (const m of listMigrations()) hash.update(m.sql)
  for (const d of listDefinitions()) hash.update(d.digest)
  hash.update(readFileSync(new URL('../../src/store/layout.ts', import.meta.url)))
  const template = `irs_tpl_part_${hash.digest('hex').slice(0, 16)}`
  await admin.query('SELECT pg_advisory_lock(7263540037)')
  try {
    const [found] = (await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [template])).rows
    if (!found) {
      const building = `${template}_building`
      await admin.query(`DROP DATABASE IF EXISTS ${building} WITH (FORCE)`)
      await admin.query(`CREATE DATABASE ${building}`)
      const store = openPostgres(withDatabase(base, building))
      try {
        await migrate(store, { layout: 'partitioned' })
      } finally {
        await store.close()
      }
      await admin.query(`ALTER DATABASE ${building} RENAME TO ${template}`)
    }
    await admin.query(`CREATE DATABASE ${name} TEMPLATE ${template}`)
  } finally {
    await admin.query('SELECT pg_advisory_unlock(7263540037)')
  }
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
  try {
    if (layout === 'partitioned') await copyPartitionedTemplate(admin, base, name)
    else await admin.query(`CREATE DATABASE ${name}`)
  } finally {
    await admin.end()
  }
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
