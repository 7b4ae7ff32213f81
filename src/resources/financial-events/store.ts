import type { NewestFirstKey } from '../../domain/cursor.ts'
import { newestFirst } from '../../store/newest-first.ts'
import type { Queryable, QueryOptions, Tx } from '../../store/store.ts'
import type { ReceivableCore } from '../receivables/store.ts'
import type { EventWriteBody, Family } from './schema.ts'

/**
 * The write path's statements whose text never varies are prepared by name on each PostgreSQL connection
 * (`QueryOptions.prepared`): planned once per connection instead of at every run (docs/performance.md).
 */
const PREPARED: QueryOptions = { prepared: true }

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

/**
 * A page of one family's events, newest first by acceptance (an event is immutable), optionally of one Receivable:
 * an index range scan of financial_events_accepted or financial_events_receivable_accepted.
 */
export async function listEvents(
  db: Queryable,
  clientCode: string,
  family: Family,
  q: { after: NewestFirstKey | undefined; receivableId: string | undefined; limit: number },
): Promise<(FinancialEventRow & { list_at: string })[]> {
  const params: unknown[] = [clientCode, family, q.limit]
  let filter = ''
  if (q.receivableId !== undefined) {
    params.push(q.receivableId)
    filter = ` AND external_receivable_id = $${params.length}`
  }
  const page = newestFirst('accepted_at', 'external_event_id', q.after, params)
  return db.query(
    `SELECT external_event_id, body, accepted_at, ${page.listAt}
       FROM financial_events WHERE client_code = $1 AND family = $2${filter}${page.where} ${page.order} LIMIT $3`,
    params,
  )
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

/**
 * What an event write reads, in one statement: the accepted events of one family among these identities, and
 * the own columns of these Receivables (the events' Receivables), each by identity: one key probe per identifier
 * (`LATERAL … LIMIT 1`), whatever the tables held when the connection's plan was made (docs/decisions.md, "Reads by
 * many identifiers probe the key per identifier").
 */
export async function findEventsAndReceivables(
  db: Queryable,
  clientCode: string,
  family: Family,
  ids: readonly string[],
  receivableIds: readonly string[],
): Promise<{ accepted: Map<string, FinancialEventRow>; receivables: Map<string, ReceivableCore> }> {
  const rows = await db.query<(FinancialEventRow & { receivable: null }) | { external_event_id: null; receivable: ReceivableCore }>(
    `SELECT e.external_event_id, e.body, e.accepted_at, NULL::json AS receivable
       FROM unnest($3::text[]) AS k(id) CROSS JOIN LATERAL (
            SELECT external_event_id, body, accepted_at FROM financial_events
             WHERE client_code = $1 AND family = $2 AND external_event_id = k.id LIMIT 1) e
     UNION ALL
     SELECT NULL, NULL, NULL, json_build_object('external_receivable_id', r.external_receivable_id, 'revision', r.revision::text,
              'status', r.status, 'source_revision', r.source_revision::text, 'currency', r.currency,
              'source_amount_minor', r.source_amount_minor::text, 'representation', r.representation)
       FROM unnest($4::text[]) AS rk(id) CROSS JOIN LATERAL (
            SELECT external_receivable_id, revision, status, source_revision, currency, source_amount_minor, representation
              FROM receivables WHERE client_code = $1 AND external_receivable_id = rk.id LIMIT 1) r`,
    [clientCode, family, ids, receivableIds],
    PREPARED,
  )
  const accepted = new Map<string, FinancialEventRow>()
  const receivables = new Map<string, ReceivableCore>()
  for (const row of rows) {
    if (row.receivable) receivables.set(row.receivable.external_receivable_id, row.receivable)
    else accepted.set(row.external_event_id, { external_event_id: row.external_event_id, body: row.body, accepted_at: row.accepted_at })
  }
  return { accepted, receivables }
}

/**
 * The events of one family, inserted, and the move of each event's Receivable (its new source amount and source revision, a new
 * revision) in one statement; distinct Receivables. Returns the Receivables' new revisions.
 */
export async function insertEventsMovingReceivables(
  tx: Tx,
  clientCode: string,
  family: Family,
  events: readonly { id: string; body: EventWriteBody; signed: bigint; next: bigint }[],
  now: string,
): Promise<Map<string, number>> {
  if (events.length === 0) return new Map()
  const rows = await tx.query<{ external_receivable_id: string; revision: string }>(
    `WITH input AS (
       SELECT * FROM unnest($3::text[], $4::text[], $5::text[], $6::bigint[], $7::bigint[], $8::bigint[])
                  AS t(id, receivable, body, signed, amount, source_revision)),
     ev AS (
       INSERT INTO financial_events (client_code, family, external_event_id, external_receivable_id, body, signed_amount_minor, accepted_at)
       SELECT $1, $2, i.id, i.receivable, i.body::jsonb, i.signed, $9 FROM input i)
     UPDATE receivables r SET source_amount_minor = i.amount, source_revision = i.source_revision, revision = r.revision + 1, updated_at = $9
       FROM input i
      WHERE r.client_code = $1 AND r.external_receivable_id = i.receivable
     RETURNING r.external_receivable_id, r.revision`,
    [
      clientCode,
      family,
      events.map((e) => e.id),
      events.map((e) => e.body.externalReceivableId),
      events.map((e) => JSON.stringify(e.body)),
      events.map((e) => e.signed.toString()),
      events.map((e) => e.next.toString()),
      events.map((e) => e.body.sourceRevision),
      now,
    ],
    PREPARED,
  )
  return new Map(rows.map((r) => [r.external_receivable_id, Number(r.revision)]))
}
