import assert from 'node:assert/strict'
import type { Queryable } from '../../src/store/store.ts'

/**
 * Fixtures of the client fan-out tests (src/workers/client-fanout.ts): bodies, Receivables inserted in bulk
 * with SQL (copies of one written through the API, so that every copy reads back like it), and the
 * exactly-once checks over the store.
 */
export const usd = (amount: string) => ({ amount, currency: 'USD' })

export const customerBody = (n = 1) => ({
  type: 'person',
  name: { firstName: 'Fan', lastName: `Out${n}` },
  sourceReference: `cust/${n}`,
})

export const receivableBody = (customerId: string, sourceRevision = 1, amount = '100.00') => ({
  financialType: 'loan_balance',
  sourceRevision,
  recoverableAmount: usd(amount),
  creditUnion: { loanAccountReference: 'loan/1', loanType: 'auto' },
  dueDate: '2026-01-01',
  responsibleCustomers: [{ externalCustomerId: customerId, role: 'primary' }],
  sourceReference: 'rcv/1',
})

/**
 * `n` copies of Receivable `templateId` (and its responsible Customers), ids `${prefix}-000001` ..., inserted
 * in two statements. They start at the template's revision and client fact.
 */
export async function bulkReceivables(db: Queryable, clientCode: string, templateId: string, prefix: string, n: number) {
  await db.query(
    `INSERT INTO receivables (client_code, external_receivable_id, revision, status, source_revision, currency, source_amount_minor,
                              representation, created_at, updated_at, client_fact_seq)
     SELECT r.client_code, $3 || '-' || lpad(i::text, 6, '0'), r.revision, r.status, r.source_revision, r.currency, r.source_amount_minor,
            r.representation, r.created_at, r.updated_at, r.client_fact_seq
       FROM receivables r, generate_series(1, $4::int) AS i
      WHERE r.client_code = $1 AND r.external_receivable_id = $2`,
    [clientCode, templateId, prefix, n],
  )
  await db.query(
    `INSERT INTO receivable_customers (client_code, external_customer_id, external_receivable_id, role)
     SELECT rc.client_code, rc.external_customer_id, $3 || '-' || lpad(i::text, 6, '0'), rc.role
       FROM receivable_customers rc, generate_series(1, $4::int) AS i
      WHERE rc.client_code = $1 AND rc.external_receivable_id = $2`,
    [clientCode, templateId, prefix, n],
  )
}

/** Receivables of the client by revision: [[revision, count], ...]. */
export async function revisionsOf(db: Queryable, clientCode: string): Promise<[number, number][]> {
  const rows = await db.query<{ revision: string; n: string }>(
    'SELECT revision, count(*) AS n FROM receivables WHERE client_code = $1 GROUP BY revision ORDER BY revision',
    [clientCode],
  )
  return rows.map((r) => [Number(r.revision), Number(r.n)])
}

/**
 * The change feed of the client after `afterSeq`, checked: seq has no gap, and every Receivable's events carry
 * strictly increasing revisions in feed order, each equal to the revision that Receivable had then (so no
 * Receivable got two revisions for one change). Returns the `receivable.updated` events as [id, revision].
 */
export async function checkedFeed(db: Queryable, clientCode: string, afterSeq = 0) {
  const events = await db.query<{ seq: string; type: string; resource_id: string; revision: string }>(
    `SELECT seq, type, resource_id, revision FROM change_events WHERE client_code = $1 AND seq > $2 ORDER BY seq`,
    [clientCode, afterSeq],
  )
  const seen = new Map<string, number>()
  events.forEach((e, i) => {
    assert.equal(Number(e.seq), afterSeq + i + 1, 'the feed has no gap')
    if (!e.type.startsWith('receivable.')) return
    const prev = seen.get(e.resource_id) ?? 0
    assert.ok(Number(e.revision) > prev, `${e.resource_id}: revision ${e.revision} after ${prev} in feed order`)
    seen.set(e.resource_id, Number(e.revision))
  })
  return events.filter((e) => e.type === 'receivable.updated').map((e) => [e.resource_id, Number(e.revision)] as [string, number])
}

export async function lastSeq(db: Queryable, clientCode: string): Promise<number> {
  const rows = await db.query<{ s: string | null }>('SELECT max(seq) AS s FROM change_events WHERE client_code = $1', [clientCode])
  return Number(rows[0]?.s ?? 0)
}

/** Ids of the client's Receivables in the database's own order (the fan-out's pass order). */
export async function idsInOrder(db: Queryable, clientCode: string): Promise<string[]> {
  const rows = await db.query<{ id: string }>(
    'SELECT external_receivable_id AS id FROM receivables WHERE client_code = $1 ORDER BY external_receivable_id',
    [clientCode],
  )
  return rows.map((r) => r.id)
}
