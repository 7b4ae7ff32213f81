import { holdColumns, holdsFromRow } from '../../domain/holds.ts'
import type { Queryable, QueryOptions, Tx } from '../../store/store.ts'
import type { ChangeInput } from '../feed/store.ts'

/**
 * Holds as the unit of work sees them (src/resources/unit-of-work.ts): the holds of Receivables read as comparable
 * snapshots (the predicates are src/domain/holds.ts over the view receivable_hold_facts), and the revision bumps
 * that a change of holds gives a Receivable. Below every family, so the unit of work depends on no family.
 */

const PREPARED: QueryOptions = { prepared: true }

/**
 * A change of derived state (holds) of many Receivables at once: each gets a new revision; returns their
 * `receivable.updated` events for the caller's unit of work. `which` selects them: listed ids, or every
 * Receivable of the client except the listed ones (already changed by this write).
 */
export async function bumpReceivableRevisions(
  tx: Tx,
  clientCode: string,
  which: { only: readonly string[] } | { allExcept: readonly string[] },
  now: string,
): Promise<ChangeInput[]> {
  const only = 'only' in which
  if (only && which.only.length === 0) return []
  const rows = await tx.query<{ external_receivable_id: string; revision: string }>(
    `UPDATE receivables SET revision = revision + 1, updated_at = $4
      WHERE client_code = $1 AND (external_receivable_id = ANY($2::text[])) = $3
      RETURNING external_receivable_id, revision`,
    [clientCode, only ? which.only : which.allExcept, only, now],
  )
  return rows.map((r) => ({
    type: 'receivable.updated' as const,
    resourceType: 'receivable' as const,
    resourceId: r.external_receivable_id,
    revision: Number(r.revision),
    occurredAt: now,
  }))
}

/** The holds of these Receivables, as one comparable string each (hold columns only: no Receivable columns). */
export type HoldSnapshot = Map<string, string>

/**
 * Read one Receivable at a time (`LATERAL … LIMIT 1`): each identifier then reaches every table of the view as a key
 * condition, whatever the tables held when the connection's plan was made. With `= ANY($2)` the generic plan read the
 * client's Receivables with the list as a filter and each of the view's tables for the whole client
 * (docs/decisions.md, "Reads by many identifiers probe the key per identifier").
 */
export async function holdSnapshot(db: Queryable, clientCode: string, ids: readonly string[]): Promise<HoldSnapshot> {
  if (ids.length === 0) return new Map()
  const rows = await db.query<{ external_receivable_id: string }>(
    `SELECT h.* FROM unnest($2::text[]) AS k(id) CROSS JOIN LATERAL (
       SELECT h.external_receivable_id, ${holdColumns()} FROM receivable_hold_facts h
        WHERE h.client_code = $1 AND h.external_receivable_id = k.id LIMIT 1) h`,
    [clientCode, ids],
    PREPARED,
  )
  return new Map(rows.map((r) => [r.external_receivable_id, holdsFromRow(r).join(',')]))
}

/** Bumps the revision of a Receivable whose derived state (holds) changed; returns the new revision. */
export async function bumpRevision(tx: Tx, clientCode: string, id: string, now: string): Promise<number> {
  const rows = await tx.query<{ revision: string }>(
    `UPDATE receivables SET revision = revision + 1, updated_at = $3 WHERE client_code = $1 AND external_receivable_id = $2 RETURNING revision`,
    [clientCode, id, now],
  )
  return Number(rows[0]?.revision)
}

/**
 * Releases every held omission of these Receivables (the Source wrote or closed them). Returns true when
 * at least one was held: the Receivable's holds changed.
 */
export async function releaseOmissions(tx: Tx, clientCode: string, receivableIds: readonly string[], now: string): Promise<boolean> {
  const rows = await tx.query(
    `UPDATE book_omissions SET released_at = $3
      WHERE client_code = $1 AND external_receivable_id = ANY($2::text[]) AND released_at IS NULL RETURNING 1`,
    [clientCode, receivableIds, now],
  )
  return rows.length > 0
}

/** The hold store functions, for the factories that receive them as a `Pick<>`. */
export const holdStore = { holdSnapshot, bumpReceivableRevisions, bumpRevision, releaseOmissions }
export type HoldStore = typeof holdStore
