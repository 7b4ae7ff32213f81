import { canonicalJson } from '../../domain/canonical.ts'
import { toMinor } from '../../domain/money.ts'
import { fieldProblem, Problem } from '../../domain/problems.ts'
import { isoNow } from '../../domain/time.ts'
import { lockIdentity } from '../../store/locks.ts'
import type { Queryable } from '../../store/store.ts'
import { answersInOrder } from '../../store/transactions.ts'
import type { HoldStore } from '../holds/store.ts'
import { defineOperation, grantOf, type OperationContext, type RouteDeps } from '../operations.ts'
import type { UnitOfWork } from '../unit-of-work.ts'
import { BalanceSnapshot, BalanceSnapshotWrite } from './schema.ts'
import {
  applyBalances,
  findSnapshot,
  insertSnapshot,
  lastSnapshotPosition,
  lockReceivablesForSnapshot,
  type Outcome,
  type SnapshotRow,
} from './store.ts'

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

export interface SnapshotServiceDeps extends RouteDeps {
  holds: Pick<HoldStore, 'releaseOmissions'>
}

export function createSnapshotService(deps: SnapshotServiceDeps) {
  const { store, clock } = deps
  const { releaseOmissions } = deps.holds
  /**
   * Snapshots are immutable and ordered by sourcePosition. Each balance is applied when its
   * sourceRevision is newer than the Receivable's (setting sourceAmount and sourceRevision, a change
   * with its feed event), `stale` when not, `unknown_receivable` when there is no such Receivable.
   */
  const putOperation = defineOperation({
    kind: 'balance_snapshot',
    scopes: ['receivables:write'],
    body: BalanceSnapshotWrite,
    response: BalanceSnapshot,
    source: true,
    async run(uow: UnitOfWork, ctx: OperationContext, body: BalanceSnapshotWrite) {
      const { clientCode, id } = ctx
      const grant = grantOf(ctx)
      const { tx } = uow
      const ids = body.balances.map((b) => b.externalReceivableId)
      // Round trip one: the client's snapshot sequence lock, then every read a decision below needs (docs/decisions.md,
      // "A write in two round trips"): the snapshot, the last position, and the Receivables, row-locked.
      const [, existing, lastPosition, current] = await answersInOrder([
        lockIdentity(tx, clientCode, 'snapshot', 'sequence'),
        findSnapshot(tx, clientCode, id),
        lastSnapshotPosition(tx, clientCode),
        lockReceivablesForSnapshot(tx, clientCode, ids),
      ])
      if (existing) {
        if (canonicalJson(existing.body) === canonicalJson(body)) return { status: 200 as const, body: async () => view(existing) }
        throw new Problem('snapshot_conflict', `Balance snapshot ${id} was already accepted with a different body.`)
      }
      if (body.feedMode !== grant.feedMode) {
        throw new Problem('feed_mode_mismatch', `This connection's feed mode is ${grant.feedMode}; the snapshot says ${body.feedMode}.`)
      }
      if (lastPosition !== null && BigInt(body.sourcePosition) <= BigInt(lastPosition)) {
        throw new Problem(
          'snapshot_out_of_order',
          `sourcePosition ${body.sourcePosition} must exceed the last snapshot's ${lastPosition}.`,
          {
            extensions: { lastSourcePosition: Number(lastPosition) },
          },
        )
      }
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
      // Round trip two: the balances and the omissions they release, then the snapshot (sent ahead with the flush).
      const applying =
        applied.length > 0
          ? answersInOrder([
              applyBalances(
                tx,
                clientCode,
                applied.map((b) => ({
                  id: b.externalReceivableId,
                  amountMinor: toMinor(b.recoverableAmount.amount),
                  sourceRevision: b.sourceRevision,
                })),
                now,
              ),
              releaseOmissions(
                tx,
                clientCode,
                applied.map((b) => b.externalReceivableId),
                now,
              ),
            ])
          : undefined
      uow.send((sending) => insertSnapshot(sending, clientCode, id, body, outcomes, now))
      if (applying) {
        const [updated] = await applying
        uow.appendChanges(
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
      // A snapshot is heard with its position (the freshness of a snapshot_only connection).
      uow.touchSource(clientCode, grant.feedMode, now, body.sourcePosition)
      return { status: 201 as const, body: async () => view({ external_snapshot_id: id, body, outcomes, accepted_at: now }) }
    },
  })

  return {
    putOperation,

    async get(clientCode: string, id: string, db: Queryable = store) {
      const row = await findSnapshot(db, clientCode, id)
      if (!row) throw new Problem('financial_event_not_found', `No balance snapshot ${id} for this client.`)
      return view(row)
    },
  }
}

export type SnapshotService = ReturnType<typeof createSnapshotService>
