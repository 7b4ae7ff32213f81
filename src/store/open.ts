import { mkdirSync } from 'node:fs'
import { resolve } from 'node:path'
import { lockDataDir } from './data-dir-lock.ts'
import { migrate } from './migrate.ts'
import { openPglite } from './pglite.ts'
import { openPostgres } from './postgres.ts'
import type { Store } from './store.ts'

/**
 * PostgreSQL when a URL is given, otherwise the embedded store in `dataDir`; migrated before use.
 * The embedded store's directory is locked to this process until the store is closed (data-dir-lock.ts);
 * a second process gets DataDirLockedError.
 */
export async function openStore(opts: { databaseUrl?: string; dataDir?: string }): Promise<Store> {
  if (opts.databaseUrl) return migrated(openPostgres(opts.databaseUrl))
  if (!opts.dataDir) return migrated(await openPglite())
  const lock = await lockDataDir(opts.dataDir)
  try {
    const dir = resolve(opts.dataDir, 'pglite')
    mkdirSync(dir, { recursive: true })
    const store = await openPglite(dir)
    const locked: Store = {
      ...store,
      async close() {
        try {
          await store.close()
        } finally {
          lock.release()
        }
      },
    }
    return await migrated(locked)
  } catch (err) {
    lock.release()
    throw err
  }
}

async function migrated(store: Store): Promise<Store> {
  try {
    await migrate(store)
  } catch (err) {
    await store.close().catch(() => {})
    throw err
  }
  return store
}
