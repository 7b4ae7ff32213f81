import { createHash, randomBytes } from 'node:crypto'
import { readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
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
 * Each test file's database copies a template (CREATE DATABASE ... TEMPLATE): the migrated schema of its layout,
 * built once per schema, named by the digest of what makes it (`schemaDigest`). The partitioned layout's conversion
 * (src/store/layout.ts) costs a database about 12 s more than the migrations alone (2.4 s plain, 14.1 to 14.7 s
 * partitioned, measured under load); the plain layout's migrations are paid once too. Built and copied under an
 * advisory lock of the server's admin connection, so test processes starting at once build it once and never copy it
 * while it is in use. The template stays on the server for the next run of the same schema; building one drops the
 * layout's templates of other schemas (an older tree's), so they do not pile up on the server.
 */
async function copyTemplate(admin: pg.Client, base: string, name: string, layout: DatabaseLayout): Promise<void> {
  const prefix = `irs_tpl_${layout === 'partitioned' ? 'part' : 'plain'}_`
  const template = `${prefix}${schemaDigest()}`
  await admin.query('SELECT pg_advisory_lock(7263540037)')
  try {
    const [found] = (await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [template])).rows
    if (!found) {
      const stale = await admin.query<{ datname: string }>('SELECT datname FROM pg_database WHERE starts_with(datname, $1)', [prefix])
      for (const { datname } of stale.rows) await admin.query(`DROP DATABASE IF EXISTS ${datname} WITH (FORCE)`)
      const building = `${template}_building`
      await admin.query(`CREATE DATABASE ${building}`)
      const store = openPostgres(withDatabase(base, building))
      try {
        await migrate(store, { layout })
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

/** What a schema is made of: the migrations, the definitions, the partitioned layout's conversion and the runner. */
function schemaDigest(): string {
  const hash = createHash('sha256')
  for (const m of listMigrations()) hash.update(m.sql)
  for (const d of listDefinitions()) hash.update(d.digest)
  hash.update(readFileSync(new URL('../../src/store/layout.ts', import.meta.url)))
  hash.update(readFileSync(new URL('../../src/store/migrate.ts', import.meta.url)))
  return hash.digest('hex').slice(0, 16)
}

/**
 * A fresh in-memory PGlite costs about 4 s of CPU for its initdb (a second WASM instance runs it) and 4 more for the
 * migrations; one started from a migrated data directory's tarball costs about 1.5 (measured under the suite's load,
 * docs/decisions.md "Test databases start from a migrated template"). So, as on PostgreSQL, the migrated schema is
 * built once per schema and layout and copied: its tarball kept in the system's temporary directory under the digest
 * of the schema and of PGlite's version (written under another name and renamed, so a test process never reads a
 * half-written one; two processes building it at once write the same bytes; building one removes the layout's
 * tarballs of other schemas), and read once per test process.
 */
const pgliteTemplates = new Map<DatabaseLayout, Promise<Blob>>()

function pgliteTemplate(layout: DatabaseLayout): Promise<Blob> {
  let template = pgliteTemplates.get(layout)
  if (!template) {
    template = readOrBuildPgliteTemplate(layout)
    pgliteTemplates.set(layout, template)
  }
  return template
}

async function readOrBuildPgliteTemplate(layout: DatabaseLayout): Promise<Blob> {
  const entry = createRequire(import.meta.url).resolve('@electric-sql/pglite') // <package>/dist/index.cjs
  const pgliteVersion = JSON.parse(readFileSync(join(dirname(entry), '..', 'package.json'), 'utf8')).version as string
  const prefix = `irs-pglite-template-${layout}-`
  const file = join(tmpdir(), `${prefix}${pgliteVersion}-${schemaDigest()}.tar`)
  try {
    return new Blob([readFileSync(file)])
  } catch {}
  // Another schema's (an older tree's): 43 MB each.
  for (const old of readdirSync(tmpdir()))
    if (old.startsWith(prefix) && old.endsWith('.tar') && join(tmpdir(), old) !== file) rmSync(join(tmpdir(), old), { force: true })
  const store = await openPglite()
  try {
    await migrate(store, { layout })
    const tarball = await store.dumpDataDir()
    const building = `${file}.${process.pid}.${randomBytes(4).toString('hex')}`
    try {
      writeFileSync(building, new Uint8Array(await tarball.arrayBuffer()))
      renameSync(building, file)
    } catch {
      rmSync(building, { force: true })
    }
    return tarball
  } finally {
    await store.close()
  }
}

/**
 * A fresh, migrated database for one test file: in-memory PGlite, or a new database on the PostgreSQL
 * server of DATABASE_URL (dropped afterwards). Never an in-memory fake. A copy of the layout's migrated template;
 * `fresh`: migrated from empty instead (the schema's own tests).
 */
export async function createTestDatabase(opts: { layout?: DatabaseLayout; fresh?: boolean } = {}): Promise<TestDatabase> {
  const layout = opts.layout ?? testLayout
  const base = process.env.DATABASE_URL
  if (!base) {
    const store = opts.fresh ? await openPglite() : await openPglite(undefined, { loadDataDir: await pgliteTemplate(layout) })
    // From the template, a check that applies nothing.
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
    if (opts.fresh) await admin.query(`CREATE DATABASE ${name}`)
    else await copyTemplate(admin, base, name, layout)
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
