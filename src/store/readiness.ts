import type { Queryable } from './store.ts'

/** Does the store answer? The readiness probe's one statement; throws when it does not. */
export async function ping(db: Queryable): Promise<void> {
  await db.query('SELECT 1')
}
