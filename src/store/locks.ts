import type { Tx } from './store.ts'

/**
 * Serializes writers of one resource identity across every connection and instance until the
 * transaction ends. Used before "read, decide, write" so that two concurrent PUTs of the same identity
 * (a create race, an idempotent retry racing its original) see each other's result instead of both
 * inserting. A hash collision only serializes two unrelated writes; it never changes a result.
 */
export async function lockIdentity(tx: Tx, clientCode: string, kind: string, id: string): Promise<void> {
  // PGlite runs one transaction at a time: nothing can interleave, so there is nothing to order.
  if (tx.serialized) return
  await tx.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [`${clientCode}/${kind}/${id}`])
}
