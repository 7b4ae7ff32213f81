import type { NewestFirstKey } from '../../domain/cursor.ts'
import { toMinor } from '../../domain/money.ts'
import { newestFirst } from '../../store/newest-first.ts'
import type { Queryable, Tx } from '../../store/store.ts'
import type { PaymentObservationWrite } from './schema.ts'

export interface ObservationRow {
  external_event_id: string
  body: PaymentObservationWrite
  unapplied_minor: string
  accepted_at: string
}

export async function findObservation(db: Queryable, clientCode: string, id: string): Promise<ObservationRow | undefined> {
  return (
    await db.query<ObservationRow>(
      'SELECT external_event_id, body, unapplied_minor, accepted_at FROM payment_observations WHERE client_code = $1 AND external_event_id = $2',
      [clientCode, id],
    )
  )[0]
}

/**
 * A page of the client's observations, newest first by acceptance (an observation is immutable), optionally of one
 * Customer: an index range scan of payment_observations_accepted or payment_observations_customer_accepted.
 */
export async function listObservations(
  db: Queryable,
  clientCode: string,
  q: { after: NewestFirstKey | undefined; customerId: string | undefined; limit: number },
): Promise<(ObservationRow & { list_at: string })[]> {
  const params: unknown[] = [clientCode, q.limit]
  let filter = ''
  if (q.customerId !== undefined) {
    params.push(q.customerId)
    filter = ` AND external_customer_id = $${params.length}`
  }
  const page = newestFirst('accepted_at', 'external_event_id', q.after, params)
  return db.query(
    `SELECT external_event_id, body, unapplied_minor, accepted_at, ${page.listAt}
       FROM payment_observations WHERE client_code = $1${filter}${page.where} ${page.order} LIMIT $2`,
    params,
  )
}

/** The observation and its allocations, in one statement. */
export async function insertObservation(
  tx: Tx,
  clientCode: string,
  id: string,
  body: PaymentObservationWrite,
  unappliedMinor: bigint,
  now: string,
): Promise<void> {
  await tx.query(
    `WITH o AS (
       INSERT INTO payment_observations (client_code, external_event_id, external_customer_id, body, unapplied_minor, accepted_at)
       VALUES ($1, $2, $3, $4, $5, $6))
     INSERT INTO payment_observation_allocations (client_code, external_event_id, external_receivable_id, amount_minor, currency)
     SELECT $1, $2, r, a, $9 FROM unnest($7::text[], $8::bigint[]) AS t(r, a)`,
    [
      clientCode,
      id,
      body.externalCustomerId,
      JSON.stringify(body),
      unappliedMinor.toString(),
      now,
      body.allocations.map((a) => a.externalReceivableId),
      body.allocations.map((a) => toMinor(a.amount.amount).toString()),
      body.amount.currency,
    ],
  )
}
