import { canonicalJson } from '../../domain/canonical.ts'
import { money, sumMinor, toMinor } from '../../domain/money.ts'
import { fieldProblem, Problem, unknownReferences } from '../../domain/problems.ts'
import { type Clock, isoNow } from '../../domain/time.ts'
import { lockIdentity } from '../../store/locks.ts'
import type { Queryable, Store, Tx } from '../../store/store.ts'
import { appendChange } from '../changes/store.ts'
import { existingCustomerIds } from '../customers/store.ts'
import { defineOperation, type OperationContext } from '../operations.ts'
import { existingReceivables } from '../receivables/store.ts'
import { PaymentObservationWrite } from './schema.ts'

interface ObservationRow {
  external_event_id: string
  body: PaymentObservationWrite
  unapplied_minor: string
  accepted_at: string
}

async function findObservation(db: Queryable, clientCode: string, id: string): Promise<ObservationRow | undefined> {
  return (
    await db.query<ObservationRow>(
      'SELECT external_event_id, body, unapplied_minor, accepted_at FROM payment_observations WHERE client_code = $1 AND external_event_id = $2',
      [clientCode, id],
    )
  )[0]
}

function toResponse(row: ObservationRow) {
  return {
    ...row.body,
    externalEventId: row.external_event_id,
    unappliedAmount: money(BigInt(row.unapplied_minor), row.body.amount.currency),
    acceptedAt: row.accepted_at,
  }
}

export function createPaymentObservationService({ store, clock }: { store: Store; clock: Clock }) {
  const put = defineOperation({
    kind: 'payment_observation',
    scopes: ['payment_observations:write'],
    body: PaymentObservationWrite,
    async run(tx: Tx, { clientCode, id }: OperationContext, body: PaymentObservationWrite) {
      await lockIdentity(tx, clientCode, 'payment_observation', id)
      const existing = await findObservation(tx, clientCode, id)
      if (existing) {
        if (canonicalJson(existing.body) === canonicalJson(body)) return { status: 200 as const, body: async () => toResponse(existing) }
        throw new Problem('payment_observation_conflict', `Payment observation ${id} was already accepted with a different body.`)
      }
      const missing: { pointer: string; what: string }[] = []
      if ((await existingCustomerIds(tx, clientCode, [body.externalCustomerId])).size === 0) {
        missing.push({ pointer: '/externalCustomerId', what: `Customer ${body.externalCustomerId}` })
      }
      const receivables = await existingReceivables(
        tx,
        clientCode,
        body.allocations.map((a) => a.externalReceivableId),
      )
      body.allocations.forEach((a, i) => {
        if (!receivables.has(a.externalReceivableId)) {
          missing.push({ pointer: `/allocations/${i}/externalReceivableId`, what: `Receivable ${a.externalReceivableId}` })
        }
      })
      if (body.reversesExternalEventId && !(await findObservation(tx, clientCode, body.reversesExternalEventId))) {
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
      await tx.query(
        `INSERT INTO payment_observations (client_code, external_event_id, external_customer_id, body, unapplied_minor, accepted_at)
         VALUES ($1, $2, $3, $4, $5, $6)`,
        [clientCode, id, body.externalCustomerId, JSON.stringify(body), unapplied.toString(), now],
      )
      if (body.allocations.length > 0) {
        await tx.query(
          `INSERT INTO payment_observation_allocations (client_code, external_event_id, external_receivable_id, amount_minor, currency)
           SELECT $1, $2, r, a, $5 FROM unnest($3::text[], $4::bigint[]) AS t(r, a)`,
          [
            clientCode,
            id,
            body.allocations.map((a) => a.externalReceivableId),
            body.allocations.map((a) => toMinor(a.amount.amount).toString()),
            body.amount.currency,
          ],
        )
      }
      appendChange(tx, clientCode, {
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
    async get(clientCode: string, id: string) {
      const row = await findObservation(store, clientCode, id)
      if (!row) throw new Problem('payment_observation_not_found', `No payment observation ${id} for this client.`)
      return toResponse(row)
    },
  }
}

export type PaymentObservationService = ReturnType<typeof createPaymentObservationService>
