import type { Queryable, Tx } from '../../store/store.ts'
import type { EventWriteBody, Family } from './schema.ts'

export interface FinancialEventRow {
  external_event_id: string
  body: EventWriteBody
  accepted_at: string
}

export async function findEvent(db: Queryable, clientCode: string, family: Family, id: string): Promise<FinancialEventRow | undefined> {
  return (
    await db.query<FinancialEventRow>(
      'SELECT external_event_id, body, accepted_at FROM financial_events WHERE client_code = $1 AND family = $2 AND external_event_id = $3',
      [clientCode, family, id],
    )
  )[0]
}

export async function insertEvent(
  tx: Tx,
  clientCode: string,
  family: Family,
  id: string,
  body: EventWriteBody,
  signed: bigint,
  now: string,
) {
  await tx.query(
    `INSERT INTO financial_events (client_code, family, external_event_id, external_receivable_id, body, signed_amount_minor, accepted_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7)`,
    [clientCode, family, id, body.externalReceivableId, JSON.stringify(body), signed.toString(), now],
  )
}
