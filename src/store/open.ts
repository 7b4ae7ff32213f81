import { mkdirSync } from 'node:fs'
import { resolve } from 'node:path'
import { migrate } from './migrate.ts'
import { openPglite } from './pglite.ts'
import { openPostgres } from './postgres.ts'
import type { Store } from './store.ts'

/** PostgreSQL when a URL is given, otherwise the embedded store in `dataDir`; migrated before use. */
export async function openStore(opts: { databaseUrl?: string; dataDir?: string }): Promise<Store> {
  let store: Store
  if (opts.databaseUrl) {
    store = openPostgres(opts.databaseUrl)
  } else {
    const dir = opts.dataDir ? resolve(opts.dataDir, 'pglite') : undefined
    if (dir) mkdirSync(dir, { recursive: true })
    store = await openPglite(dir)
  }
  await migrate(store)
  return store
}
