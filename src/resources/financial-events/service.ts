import { canonicalJson } from '../../domain/canonical.ts'
import { newestFirstPage, readNewestFirstCursor } from '../../domain/cursor.ts'
import { describeMoney, toMinor } from '../../domain/money.ts'
import { fieldProblem, Problem, unknownReferences } from '../../domain/problems.ts'
import { isoNow } from '../../domain/time.ts'
import { lockIdentities } from '../../store/locks.ts'
import type { Queryable } from '../../store/store.ts'
import { answersInOrder } from '../../store/transactions.ts'
import {
  defineOperation,
  type OperationContext,
  type RouteDeps,
  runOne,
  type SetOperation,
  type SetOutcome,
  type WriteOperation,
} from '../operations.ts'
import type { ReceivableCore } from '../receivables/store.ts'
import type { UnitOfWork } from '../unit-of-work.ts'
import { EventResponse, EventWrite, type EventWriteBody, FAMILIES, type Family } from './schema.ts'
import { type FinancialEventRow, findEvent, findEventsAndReceivables, insertEventsMovingReceivables, listEvents } from './store.ts'

/**
 * The database and the clock: an event's reads and writes are one statement each in this family's store, which
 * reads and moves the events' Receivables itself.
 */
export type FinancialEventServiceDeps = RouteDeps

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

export function createFinancialEventService({ store, clock }: FinancialEventServiceDeps) {
  /**
   * The set-based event write: one query for the events already accepted and their Receivables, the rules in
   * memory, and one statement that inserts the events and moves their Receivables. Nothing falls back.
   */
  function manyOf(family: Family): SetOperation<EventWriteBody> {
    return {
      keys: (id, body) => ({ writes: [`${family}:${id}`, `receivable:${body.externalReceivableId}`], reads: [] }),
      async runMany(uow, { clientCode, grant, locked }, records, now) {
        const { tx } = uow
        if (grant.feedMode === 'snapshot_only') {
          return records.map(() => ({
            problem: new Problem(
              'feed_mode_mismatch',
              'This connection sends balance snapshots (feedMode snapshot_only); financial events are refused.',
            ),
          }))
        }
        // The identity locks and the read in one round trip (the read is answered once the locks are held).
        const [, { accepted, receivables: cores }] = await answersInOrder([
          locked
            ? undefined
            : lockIdentities(tx, clientCode, [
                ...records.map((r) => [family, r.id] as const),
                ...records.map((r) => ['receivable', r.body.externalReceivableId] as const),
              ]),
          findEventsAndReceivables(
            tx,
            clientCode,
            family,
            records.map((r) => r.id),
            records.map((r) => r.body.externalReceivableId),
          ),
        ])
        const outcomes: SetOutcome[] = []
        const writes: { index: number; id: string; body: EventWriteBody; signed: bigint; next: bigint }[] = []
        for (const [index, { id, body }] of records.entries()) {
          const existing = accepted.get(id)
          if (existing) {
            outcomes.push(
              canonicalJson(existing.body) === canonicalJson(body)
                ? { status: 200, body: async () => toResponse(existing) }
                : {
                    problem: new Problem(
                      'financial_event_conflict',
                      `${FAMILIES[family].title} ${id} was already accepted with a different body.`,
                    ),
                  },
            )
            continue
          }
          const decided = decide(body, cores.get(body.externalReceivableId))
          if (decided instanceof Problem) {
            outcomes.push({ problem: decided })
            continue
          }
          writes.push({ index, id, body, signed: decided.signed, next: decided.next })
          outcomes.push({ status: 201, body: async () => ({ ...body, externalEventId: id, acceptedAt: now }) })
        }
        const revisions = await insertEventsMovingReceivables(tx, clientCode, family, writes, now)
        for (const w of writes) {
          uow.appendChange(clientCode, {
            type: 'receivable.updated',
            resourceType: 'receivable',
            resourceId: w.body.externalReceivableId,
            revision: revisions.get(w.body.externalReceivableId) as number,
            occurredAt: now,
          })
        }
        return outcomes
      },
    }
  }

  /** The rules of an event on its Receivable, in the synchronous order; the signed amount and the new source amount. */
  function decide(body: EventWriteBody, receivable: ReceivableCore | undefined): Problem | { signed: bigint; next: bigint } {
    if (!receivable) return unknownReferences([{ pointer: '/externalReceivableId', what: `Receivable ${body.externalReceivableId}` }])
    if (body.amount.currency !== receivable.currency) {
      return fieldProblem('/amount/currency', 'custom', `must be ${receivable.currency}, the Receivable's currency`)
    }
    const current = Number(receivable.source_revision)
    if (body.sourceRevision <= current) {
      return new Problem(
        'stale_source_revision',
        `sourceRevision ${body.sourceRevision} is not newer than the Receivable's current source revision ${current}.`,
        { extensions: { currentSourceRevision: current } },
      )
    }
    const signed = signedAmount(body)
    const next = BigInt(receivable.source_amount_minor) + signed
    if (next < 0n) {
      return fieldProblem(
        '/amount/amount',
        'custom',
        `would take the source amount below zero (it is ${describeMoney(BigInt(receivable.source_amount_minor), receivable.currency)})`,
      )
    }
    return { signed, next }
  }

  function operation(family: Family): WriteOperation {
    const many = manyOf(family)
    return defineOperation({
      kind: family,
      scopes: ['financial_corrections:write'],
      body: EventWrite[family],
      response: EventResponse[family],
      source: true,
      many: many as SetOperation<unknown>,
      /** A list of one through `many` (an event never falls back). */
      run(uow: UnitOfWork, ctx: OperationContext, raw) {
        return runOne(many, uow, ctx, raw as EventWriteBody, isoNow(clock), () => {
          throw new Error(`${family}: the set-based write has no per-record fallback`)
        })
      },
    })
  }

  return {
    operations: {
      adjustment: operation('adjustment'),
      credit_note: operation('credit_note'),
      write_off: operation('write_off'),
    } as Record<Family, WriteOperation>,

    async get(clientCode: string, family: Family, id: string, db: Queryable = store) {
      const row = await findEvent(db, clientCode, family, id)
      if (!row) throw new Problem('financial_event_not_found', `No ${FAMILIES[family].title} ${id} for this client.`)
      return toResponse(row)
    },

    /** A page of one family, newest first; each item exactly as its GET renders it. */
    async list(
      clientCode: string,
      family: Family,
      q: { cursor?: string | undefined; limit: number; externalReceivableId?: string | undefined },
    ) {
      const after = readNewestFirstCursor(`financial-events/${family}`, q.cursor)
      const rows = await listEvents(store, clientCode, family, { after, receivableId: q.externalReceivableId, limit: q.limit + 1 })
      const { page, nextCursor } = newestFirstPage(`financial-events/${family}`, rows, q.limit, (r) => r.external_event_id)
      return { data: page.map(toResponse), nextCursor }
    },
  }
}

export type FinancialEventService = ReturnType<typeof createFinancialEventService>
