import { createHash } from 'node:crypto'
import { readdirSync, readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { type DatabaseLayout, partitionClientTables } from './layout.ts'
import type { Store, Tx } from './store.ts'

const here = dirname(fileURLToPath(import.meta.url))

export interface Migration {
  version: number
  name: string
  sql: string
}

const migrationsDir = join(here, 'migrations')
/** Inside the migrations folder so that every build step that ships the migrations (package.json, Dockerfile) ships them. */
const definitionsDir = join(migrationsDir, 'definitions')

export function listMigrations(): Migration[] {
  const dir = migrationsDir
  return readdirSync(dir)
    .filter((f) => /^\d{4}_[a-z0-9_]+\.sql$/.test(f))
    .sort()
    .map((f) => ({ version: Number(f.slice(0, 4)), name: f.slice(5, -4), sql: readFileSync(join(dir, f), 'utf8') }))
}

export interface Definition {
  /** The file name without `.sql`, e.g. `02_receivable_hold_facts`. */
  name: string
  sql: string
  digest: string
}

/** The definition files (views and functions), in the order they are applied: a dependant after what it reads. */
export function listDefinitions(): Definition[] {
  const dir = definitionsDir
  return readdirSync(dir)
    .filter((f) => /^\d{2}_[a-z0-9_]+\.sql$/.test(f))
    .sort()
    .map((f) => {
      const sql = readFileSync(join(dir, f), 'utf8')
      return { name: f.slice(0, -4), sql, digest: createHash('sha256').update(sql).digest('hex') }
    })
}

/**
 * Forward-only numbered migrations (tables, columns, constraints, indexes, data), then the definition files
 * (every view and SQL function, src/store/migrations/definitions/), all in one transaction. Safe when several instances start
 * at once: the whole run holds a transaction-scoped advisory lock, so the second instance waits and then finds
 * nothing to apply.
 *
 * A view or function is declared in its definition file only, in its current form, written to be re-applied
 * (CREATE OR REPLACE; DROP ... IF EXISTS first where a view's columns or a function's signature change). Migrations
 * older than the definition files declared some of them too; those declarations still run on a fresh database and
 * are then replaced. A migration that changes a column a view reads drops the view itself; the definitions
 * re-create it at the end of the same run.
 *
 * The definitions are re-applied whenever a migration ran or a file's digest differs from the one recorded in
 * schema_definitions, and only then: replacing a view takes an exclusive lock on it, which an instance starting
 * beside others serving requests should not take for nothing.
 *
 * With `layout: 'partitioned'` (layout.ts), every client-keyed table still unpartitioned after the migrations is
 * converted to one hash-partitioned by `client_code`, before the definitions are applied.
 */
export async function migrate(store: Store, opts: { layout?: DatabaseLayout } = {}): Promise<number[]> {
  return store.transaction(async (tx) => {
    await tx.query('SELECT pg_advisory_xact_lock(7263540021)')
    await tx.query(`CREATE TABLE IF NOT EXISTS schema_migrations (
      version integer PRIMARY KEY,
      name text NOT NULL,
      applied_at timestamptz NOT NULL DEFAULT now())`)
    const done = new Set((await tx.query<{ version: number }>('SELECT version FROM schema_migrations')).map((r) => r.version))
    const applied: number[] = []
    for (const m of listMigrations()) {
      if (done.has(m.version)) continue
      await tx.exec(m.sql)
      await tx.query('INSERT INTO schema_migrations (version, name) VALUES ($1, $2)', [m.version, m.name])
      applied.push(m.version)
    }
    const converted = opts.layout === 'partitioned' ? await partitionClientTables(tx) : []
    await applyDefinitions(tx, applied.length > 0 || converted.length > 0)
    return applied
  })
}

async function applyDefinitions(tx: Tx, migrated: boolean): Promise<void> {
  await tx.query(`CREATE TABLE IF NOT EXISTS schema_definitions (
      name text PRIMARY KEY,
      digest text NOT NULL,
      applied_at timestamptz NOT NULL DEFAULT now())`)
  const definitions = listDefinitions()
  const recorded = await tx.query<{ name: string; digest: string }>('SELECT name, digest FROM schema_definitions ORDER BY name')
  const current =
    !migrated &&
    recorded.length === definitions.length &&
    definitions.every((d) => recorded.some((r) => r.name === d.name && r.digest === d.digest))
  if (current) return
  for (const d of definitions) await tx.exec(d.sql)
  await tx.query('DELETE FROM schema_definitions')
  await tx.query('INSERT INTO schema_definitions (name, digest) SELECT * FROM unnest($1::text[], $2::text[])', [
    definitions.map((d) => d.name),
    definitions.map((d) => d.digest),
  ])
}
