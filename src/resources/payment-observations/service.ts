import { canonicalJson } from '../../domain/canonical.ts'
import { newestFirstPage, readNewestFirstCursor } from '../../domain/cursor.ts'
import { money, sumMinor, toMinor } from '../../domain/money.ts'
import { fieldProblem, Problem, unknownReferences } from '../../domain/problems.ts'
import { isoNow } from '../../domain/time.ts'
import { lockIdentity } from '../../store/locks.ts'
import type { Queryable } from '../../store/store.ts'
import { answersInOrder } from '../../store/transactions.ts'
import type { CustomerStore } from '../customers/store.ts'
import { defineOperation, type OperationContext, type RouteDeps } from '../operations.ts'
import type { ReceivableStore } from '../receivables/store.ts'
import type { UnitOfWork } from '../unit-of-work.ts'
import { PaymentObservationResponse, PaymentObservationWrite } from './schema.ts'
import { findObservation, insertObservation, listObservations, type ObservationRow } from './store.ts'

function toResponse(row: ObservationRow) {
  return {
    ...row.body,
    externalEventId: row.external_event_id,
    unappliedAmount: money(BigInt(row.unapplied_minor), row.body.amount.currency),
    acceptedAt: row.accepted_at,
  }
}

export interface PaymentObservationServiceDeps extends RouteDeps {
  customers: Pick<CustomerStore, 'existingCustomerIds'>
  receivables: Pick<ReceivableStore, 'existingReceivables'>
}

export function createPaymentObservationService({ store, clock, customers, receivables: receivableStore }: PaymentObservationServiceDeps) {
  const { existingCustomerIds } = customers
  const { existingReceivables } = receivableStore
  const put = defineOperation({
    kind: 'payment_observation',
    scopes: ['payment_observations:write'],
    body: PaymentObservationWrite,
    response: PaymentObservationResponse,
    source: true,
    async run(uow: UnitOfWork, { clientCode, id }: OperationContext, body: PaymentObservationWrite) {
      const { tx } = uow
      // Round trip one: the identity lock and every read a decision below needs (docs/decisions.md, "A write in two
      // round trips"), read even when the first answer already decides (a retry): they cost no round trip.
      const [, existing, customerIds, receivables, reversed] = await answersInOrder([
        lockIdentity(tx, clientCode, 'payment_observation', id),
        findObservation(tx, clientCode, id),
        existingCustomerIds(tx, clientCode, [body.externalCustomerId]),
        existingReceivables(
          tx,
          clientCode,
          body.allocations.map((a) => a.externalReceivableId),
        ),
        body.reversesExternalEventId ? findObservation(tx, clientCode, body.reversesExternalEventId) : undefined,
      ])
      if (existing) {
        if (canonicalJson(existing.body) === canonicalJson(body)) return { status: 200 as const, body: async () => toResponse(existing) }
        throw new Problem('payment_observation_conflict', `Payment observation ${id} was already accepted with a different body.`)
      }
      const missing: { pointer: string; what: string }[] = []
      if (customerIds.size === 0) {
        missing.push({ pointer: '/externalCustomerId', what: `Customer ${body.externalCustomerId}` })
      }
      body.allocations.forEach((a, i) => {
        if (!receivables.has(a.externalReceivableId)) {
          missing.push({ pointer: `/allocations/${i}/externalReceivableId`, what: `Receivable ${a.externalReceivableId}` })
        }
      })
      if (body.reversesExternalEventId && !reversed) {
        missing.push({ pointer: '/reversesExternalEventId', what: `Payment observation ${body.reversesExternalEventId}` })
      }
      if (missing.length > 0) throw unknownReferences(missing)
      body.allocations.forEach((a, i) => {
        const currency = receivables.get(a.externalReceivableId)?.currency
        if (currency !== a.amount.currency) {
          throw fieldProblem(`/allocations/${i}/amount/currency`, 'custom', `must be ${currency}, the Receivable's currency`)
        }
      })
      const unapplied = toMinor(body.amount.amount) - sumMinor(body.allocations.map((a) => a.amount))
      const now = isoNow(clock)
      // Sent ahead with the flush: the answer is rendered from what was sent.
      uow.send((sending) => insertObservation(sending, clientCode, id, body, unapplied, now))
      uow.appendChange(clientCode, {
        type: 'payment_observation.created',
        resourceType: 'payment_observation',
        resourceId: id,
        revision: 1,
        occurredAt: now,
      })
      return {
        status: 201 as const,
        body: async () => toResponse({ external_event_id: id, body, unapplied_minor: unapplied.toString(), accepted_at: now }),
      }
    },
  })

  return {
    put,
    async get(clientCode: string, id: string, db: Queryable = store) {
      const row = await findObservation(db, clientCode, id)
      if (!row) throw new Problem('payment_observation_not_found', `No payment observation ${id} for this client.`)
      return toResponse(row)
    },

    /** A page, newest first; each item exactly as its GET renders it. */
    async list(clientCode: string, q: { cursor?: string | undefined; limit: number; externalCustomerId?: string | undefined }) {
      const after = readNewestFirstCursor('payment-observations', q.cursor)
      const rows = await listObservations(store, clientCode, { after, customerId: q.externalCustomerId, limit: q.limit + 1 })
      const { page, nextCursor } = newestFirstPage('payment-observations', rows, q.limit, (r) => r.external_event_id)
      return { data: page.map(toResponse), nextCursor }
    },
  }
}

export type PaymentObservationService = ReturnType<typeof createPaymentObservationService>
