import type { Queryable, Tx } from '../../store/store.ts'
import type { BalanceSnapshotWrite } from './schema.ts'

export type Outcome = 'applied' | 'stale' | 'unknown_receivable'

export interface SnapshotRow {
  external_snapshot_id: string
  body: BalanceSnapshotWrite
  outcomes: Outcome[]
  accepted_at: string
}

export async function findSnapshot(db: Queryable, clientCode: string, id: string): Promise<SnapshotRow | undefined> {
  return (
    await db.query<SnapshotRow>(
      'SELECT external_snapshot_id, body, outcomes, accepted_at FROM balance_snapshots WHERE client_code = $1 AND external_snapshot_id = $2',
      [clientCode, id],
    )
  )[0]
}

export async function lastSnapshotPosition(db: Queryable, clientCode: string): Promise<string | null> {
  const rows = await db.query<{ max: string | null }>(
    'SELECT max(source_position)::text AS max FROM balance_snapshots WHERE client_code = $1',
    [clientCode],
  )
  return rows[0]?.max ?? null
}

/** The snapshot's Receivables that exist, row-locked in identifier order. */
export async function lockReceivablesForSnapshot(tx: Tx, clientCode: string, ids: readonly string[]) {
  return tx.query<{ external_receivable_id: string; source_revision: string; currency: string }>(
    `SELECT external_receivable_id, source_revision, currency FROM receivables
      WHERE client_code = $1 AND external_receivable_id = ANY($2::text[]) ORDER BY external_receivable_id FOR UPDATE`,
    [clientCode, ids],
  )
}

/**
 * Applies the balances in one statement; returns each Receivable's new revision. An applied entry is a declaration
 * of the balance: it includes every receipt the Source acknowledged before, so acknowledged-undeclared money
 * returns to zero (docs/design/money.md), every Payment's share of it with one more declaration counted
 * (payments/take-back.ts).
 */
export async function applyBalances(
  tx: Tx,
  clientCode: string,
  balances: readonly { id: string; amountMinor: bigint; sourceRevision: number }[],
  now: string,
) {
  return tx.query<{ external_receivable_id: string; revision: string }>(
    `UPDATE receivables r SET source_amount_minor = a.amount, source_revision = a.source_revision, acknowledged_undeclared_minor = 0,
            declarations = r.declarations + 1, revision = r.revision + 1, updated_at = $5
       FROM unnest($2::text[], $3::bigint[], $4::bigint[]) AS a(id, amount, source_revision)
      WHERE r.client_code = $1 AND r.external_receivable_id = a.id
      RETURNING r.external_receivable_id, r.revision`,
    [clientCode, balances.map((b) => b.id), balances.map((b) => b.amountMinor.toString()), balances.map((b) => b.sourceRevision), now],
  )
}

export async function insertSnapshot(
  tx: Tx,
  clientCode: string,
  id: string,
  body: BalanceSnapshotWrite,
  outcomes: readonly Outcome[],
  now: string,
): Promise<void> {
  await tx.query(
    `INSERT INTO balance_snapshots (client_code, external_snapshot_id, body, feed_mode, source_position, outcomes, accepted_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7)`,
    [clientCode, id, JSON.stringify(body), body.feedMode, body.sourcePosition, JSON.stringify(outcomes), now],
  )
}
