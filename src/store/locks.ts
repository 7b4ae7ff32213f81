import type { QueryOptions, Tx } from './store.ts'

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

/** Prepared by name on each PostgreSQL connection: its text never varies (docs/performance.md). */
const PREPARED: QueryOptions = { prepared: true }

/**
 * `lockIdentity` for many identities in one statement, in a fixed (sorted) order so two
 * writers locking overlapping sets cannot deadlock on them. Nothing to do on PGlite (one transaction at a time).
 */
export async function lockIdentities(tx: Tx, clientCode: string, identities: readonly (readonly [kind: string, id: string])[]) {
  if (tx.serialized || identities.length === 0) return
  const keys = [...new Set(identities.map(([kind, id]) => `${clientCode}/${kind}/${id}`))].sort()
  await tx.query(
    'SELECT pg_advisory_xact_lock(hashtextextended(k, 0)) FROM unnest($1::text[]) WITH ORDINALITY AS t(k, n) ORDER BY n',
    [keys],
    PREPARED,
  )
}
