import { canonicalJson } from '../../domain/canonical.ts'
import { toMinor } from '../../domain/money.ts'
import { fieldProblem, Problem } from '../../domain/problems.ts'
import { type Clock, isoNow } from '../../domain/time.ts'
import type { Grant } from '../../http/auth.ts'
import { lockIdentity } from '../../store/locks.ts'
import type { Queryable, Store } from '../../store/store.ts'
import { releaseOmissions } from '../book/store.ts'
import { appendChanges } from '../changes/store.ts'
import { touchSourceActivity } from '../freshness/service.ts'
import type { BalanceSnapshotWrite } from './schema.ts'

type Outcome = 'applied' | 'stale' | 'unknown_receivable'

interface SnapshotRow {
  external_snapshot_id: string
  body: BalanceSnapshotWrite
  outcomes: Outcome[]
  accepted_at: string
}

async function findSnapshot(db: Queryable, clientCode: string, id: string): Promise<SnapshotRow | undefined> {
  return (
    await db.query<SnapshotRow>(
      'SELECT external_snapshot_id, body, outcomes, accepted_at FROM balance_snapshots WHERE client_code = $1 AND external_snapshot_id = $2',
      [clientCode, id],
    )
  )[0]
}

function view(row: SnapshotRow) {
  return {
    externalSnapshotId: row.external_snapshot_id,
    acceptedAt: row.accepted_at,
    asOf: row.body.asOf,
    feedMode: row.body.feedMode,
    sourcePosition: row.body.sourcePosition,
    balances: row.body.balances.map((b, i) => ({ ...b, outcome: row.outcomes[i] as Outcome })),
  }
}

export function createSnapshotService({ store, clock }: { store: Store; clock: Clock }) {
  return {
    /**
     * Snapshots are immutable and ordered by sourcePosition. Each balance is applied when its
     * sourceRevision is newer than the Receivable's (setting sourceAmount and sourceRevision, a change
     * with its feed event), `stale` when not, `unknown_receivable` when there is no such Receivable.
     */
    put(clientCode: string, grant: Grant, id: string, body: BalanceSnapshotWrite) {
      return store.transaction(async (tx) => {
        await lockIdentity(tx, clientCode, 'snapshot', 'sequence')
        const existing = await findSnapshot(tx, clientCode, id)
        if (existing) {
          if (canonicalJson(existing.body) === canonicalJson(body)) return { status: 200 as const, body: view(existing) }
          throw new Problem('snapshot_conflict', `Balance snapshot ${id} was already accepted with a different body.`)
        }
        if (body.feedMode !== grant.feedMode) {
          throw new Problem('feed_mode_mismatch', `This connection's feed mode is ${grant.feedMode}; the snapshot says ${body.feedMode}.`)
        }
        const last = await tx.query<{ max: string | null }>(
          'SELECT max(source_position)::text AS max FROM balance_snapshots WHERE client_code = $1',
          [clientCode],
        )
        const lastPosition = last[0]?.max
        if (lastPosition !== null && lastPosition !== undefined && BigInt(body.sourcePosition) <= BigInt(lastPosition)) {
          throw new Problem(
            'snapshot_out_of_order',
            `sourcePosition ${body.sourcePosition} must exceed the last snapshot's ${lastPosition}.`,
            {
              extensions: { lastSourcePosition: Number(lastPosition) },
            },
          )
        }
        const ids = body.balances.map((b) => b.externalReceivableId)
        const current = await tx.query<{ external_receivable_id: string; source_revision: string; currency: string }>(
          `SELECT external_receivable_id, source_revision, currency FROM receivables
            WHERE client_code = $1 AND external_receivable_id = ANY($2::text[]) ORDER BY external_receivable_id FOR UPDATE`,
          [clientCode, ids],
        )
        const byId = new Map(current.map((r) => [r.external_receivable_id, r]))
        body.balances.forEach((b, i) => {
          const r = byId.get(b.externalReceivableId)
          if (r && r.currency !== b.recoverableAmount.currency) {
            throw fieldProblem(`/balances/${i}/recoverableAmount/currency`, 'custom', `must be ${r.currency}, the Receivable's currency`)
          }
        })
        const outcomes: Outcome[] = body.balances.map((b) => {
          const r = byId.get(b.externalReceivableId)
          if (!r) return 'unknown_receivable'
          return b.sourceRevision > Number(r.source_revision) ? 'applied' : 'stale'
        })
        const applied = body.balances.filter((_, i) => outcomes[i] === 'applied')
        const now = isoNow(clock)
        if (applied.length > 0) {
          const updated = await tx.query<{ external_receivable_id: string; revision: string }>(
            `UPDATE receivables r SET source_amount_minor = a.amount, source_revision = a.source_revision, revision = r.revision + 1, updated_at = $5
               FROM unnest($2::text[], $3::bigint[], $4::bigint[]) AS a(id, amount, source_revision)
              WHERE r.client_code = $1 AND r.external_receivable_id = a.id
              RETURNING r.external_receivable_id, r.revision`,
            [
              clientCode,
              applied.map((b) => b.externalReceivableId),
              applied.map((b) => toMinor(b.recoverableAmount.amount).toString()),
              applied.map((b) => b.sourceRevision),
              now,
            ],
          )
          await releaseOmissions(
            tx,
            clientCode,
            applied.map((b) => b.externalReceivableId),
            now,
          )
          appendChanges(
            tx,
            clientCode,
            updated.map((u) => ({
              type: 'receivable.updated',
              resourceType: 'receivable' as const,
              resourceId: u.external_receivable_id,
              revision: Number(u.revision),
              occurredAt: now,
            })),
          )
        }
        await tx.query(
          `INSERT INTO balance_snapshots (client_code, external_snapshot_id, body, feed_mode, source_position, outcomes, accepted_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7)`,
          [clientCode, id, JSON.stringify(body), body.feedMode, body.sourcePosition, JSON.stringify(outcomes), now],
        )
        touchSourceActivity(tx, clientCode, grant.feedMode, now, body.sourcePosition)
        return { status: 201 as const, body: view({ external_snapshot_id: id, body, outcomes, accepted_at: now }) }
      })
    },

    async get(clientCode: string, id: string) {
      const row = await findSnapshot(store, clientCode, id)
      if (!row) throw new Problem('financial_event_not_found', `No balance snapshot ${id} for this client.`)
      return view(row)
    },
  }
}

export type SnapshotService = ReturnType<typeof createSnapshotService>
