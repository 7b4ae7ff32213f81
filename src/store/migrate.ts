import { readdirSync, readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { Store } from './store.ts'

const dir = join(dirname(fileURLToPath(import.meta.url)), 'migrations')

export interface Migration {
  version: number
  name: string
  sql: string
}

export function listMigrations(): Migration[] {
  return readdirSync(dir)
    .filter((f) => /^\d{4}_[a-z0-9_]+\.sql$/.test(f))
    .sort()
    .map((f) => ({ version: Number(f.slice(0, 4)), name: f.slice(5, -4), sql: readFileSync(join(dir, f), 'utf8') }))
}

/**
 * Forward-only numbered migrations. Safe when several instances start at once: the whole run holds a
 * transaction-scoped advisory lock, so the second instance waits and then finds nothing to apply.
 */
export async function migrate(store: Store): Promise<number[]> {
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
    return applied
  })
}
