import { canonicalJson } from '../../domain/canonical.ts'
import { describeMoney, toMinor } from '../../domain/money.ts'
import { fieldProblem, Problem, unknownReferences } from '../../domain/problems.ts'
import { isoNow } from '../../domain/time.ts'
import { lockIdentity } from '../../store/locks.ts'
import { defineOperation, type OperationContext, type RouteDeps, type WriteOperation } from '../operations.ts'
import type { ReceivableStore } from '../receivables/store.ts'
import type { UnitOfWork } from '../unit-of-work.ts'
import { EventResponse, EventWrite, type EventWriteBody, FAMILIES, type Family } from './schema.ts'
import { type FinancialEventRow, findEvent, insertEvent } from './store.ts'

/** The database (reads), the clock, and the Receivable store functions an event uses. */
export interface FinancialEventServiceDeps extends RouteDeps {
  receivables: Pick<ReceivableStore, 'findReceivableCore' | 'moveSourceAmount'>
}

/** The response allowlist drops `staffNote`; this mapping only adds the identity and acceptance time. */
function toResponse(row: FinancialEventRow) {
  return { ...row.body, externalEventId: row.external_event_id, acceptedAt: row.accepted_at }
}

/** Credit notes and write-offs decrease; an adjustment declares its direction. */
function signedAmount(body: EventWriteBody): bigint {
  const amount = toMinor(body.amount.amount)
  const decrease = body.type !== 'adjustment' || body.direction === 'decrease'
  return decrease ? -amount : amount
}

export function createFinancialEventService({ store, clock, receivables }: FinancialEventServiceDeps) {
  const { findReceivableCore, moveSourceAmount } = receivables
  function operation(family: Family): WriteOperation {
    return defineOperation({
      kind: family,
      scopes: ['financial_corrections:write'],
      body: EventWrite[family],
      response: EventResponse[family],
      source: true,
      async run(uow: UnitOfWork, { clientCode, grant, id }: OperationContext, raw) {
        const { tx } = uow
        const body = raw as EventWriteBody
        if (grant.feedMode === 'snapshot_only') {
          throw new Problem(
            'feed_mode_mismatch',
            'This connection sends balance snapshots (feedMode snapshot_only); financial events are refused.',
          )
        }
        await lockIdentity(tx, clientCode, family, id)
        const existing = await findEvent(tx, clientCode, family, id)
        if (existing) {
          if (canonicalJson(existing.body) === canonicalJson(body)) return { status: 200 as const, body: async () => toResponse(existing) }
          throw new Problem('financial_event_conflict', `${FAMILIES[family].title} ${id} was already accepted with a different body.`)
        }
        await lockIdentity(tx, clientCode, 'receivable', body.externalReceivableId)
        const receivable = await findReceivableCore(tx, clientCode, body.externalReceivableId)
        if (!receivable) throw unknownReferences([{ pointer: '/externalReceivableId', what: `Receivable ${body.externalReceivableId}` }])
        if (body.amount.currency !== receivable.currency) {
          throw fieldProblem('/amount/currency', 'custom', `must be ${receivable.currency}, the Receivable's currency`)
        }
        const current = Number(receivable.source_revision)
        if (body.sourceRevision <= current) {
          throw new Problem(
            'stale_source_revision',
            `sourceRevision ${body.sourceRevision} is not newer than the Receivable's current source revision ${current}.`,
            { extensions: { currentSourceRevision: current } },
          )
        }
        const signed = signedAmount(body)
        const next = BigInt(receivable.source_amount_minor) + signed
        if (next < 0n) {
          throw fieldProblem(
            '/amount/amount',
            'custom',
            `would take the source amount below zero (it is ${describeMoney(BigInt(receivable.source_amount_minor), receivable.currency)})`,
          )
        }
        const now = isoNow(clock)
        await insertEvent(tx, clientCode, family, id, body, signed, now)
        await moveSourceAmount(tx, clientCode, body.externalReceivableId, next, body.sourceRevision, now)
        uow.appendChange(clientCode, {
          type: 'receivable.updated',
          resourceType: 'receivable',
          resourceId: body.externalReceivableId,
          revision: Number(receivable.revision) + 1,
          occurredAt: now,
        })
        return { status: 201 as const, body: async () => ({ ...body, externalEventId: id, acceptedAt: now }) }
      },
    })
  }

  return {
    operations: {
      adjustment: operation('adjustment'),
      credit_note: operation('credit_note'),
      write_off: operation('write_off'),
    } as Record<Family, WriteOperation>,

    async get(clientCode: string, family: Family, id: string) {
      const row = await findEvent(store, clientCode, family, id)
      if (!row) throw new Problem('financial_event_not_found', `No ${FAMILIES[family].title} ${id} for this client.`)
      return toResponse(row)
    },
  }
}

export type FinancialEventService = ReturnType<typeof createFinancialEventService>
