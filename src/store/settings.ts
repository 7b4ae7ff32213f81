import type { Queryable } from './store.ts'

/**
 * The `settings` table: one value per key, written once. A claim is how one start among several instances does
 * something once (the generated operator token, the sandbox demo): whoever inserts the key first did it.
 */

/** Inserts the key unless it exists; true when this call inserted it. */
export async function claimSetting(db: Queryable, key: string, value: string): Promise<boolean> {
  const rows = await db.query('INSERT INTO settings (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING RETURNING key', [key, value])
  return rows.length > 0
}

export async function readSetting(db: Queryable, key: string): Promise<string | undefined> {
  return (await db.query<{ value: string }>('SELECT value FROM settings WHERE key = $1', [key]))[0]?.value
}
