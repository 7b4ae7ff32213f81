import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { after, before, describe, test } from 'node:test'
import { problemCode, type Response, startTestApp, type Tenant, type TestApp } from '../../helpers/app.ts'
import { payableReceivable } from '../../helpers/payments.ts'
import { engineName } from '../../helpers/store.ts'

/**
 * Issue 35 item 4: erasure of a Customer's personal data. Every personal value is searched for in every text and
 * JSON column of every table (information_schema) before (the control: it is there) and after (it is nowhere);
 * amounts, identifiers and holds stay; later writes of personal data for the Customer are refused.
 */
const C = 'er-c'
const usd = (amount: string) => ({ amount, currency: 'USD' })
let t: TestApp
let k: Tenant

/** Distinctive values, so that a hit anywhere is this Customer's. */
const PERSONAL = [
  'Zebulonius',
  'Quixoticson',
  'Zebulonius Q. Quixoticson',
  'Marigold Quixoticson',
  '77 Xylophone Lane',
  'Flat 9 Quuxhouse',
  'Quuxvillestadt',
  'QX9 8ZZ',
  'Quuxshire',
  'zq-unique@example.com',
  'marigold-q@example.com',
  '+12175550199',
  'hardship-note-zq',
  'Instalment for Zebulonius',
]

const person = (contacts: unknown[], restrictions: unknown[] = []) => ({
  type: 'person',
  name: { firstName: 'Zebulonius', lastName: 'Quixoticson' },
  sourceReference: 'ledger/customers/zq',
  contacts,
  restrictions,
})
const self = {
  externalContactId: 'ct-self',
  fullName: 'Zebulonius Q. Quixoticson',
  isCustomerSelf: true,
  isMain: true,
  address: {
    countryCode: 'GB',
    line1: '77 Xylophone Lane',
    line2: 'Flat 9 Quuxhouse',
    locality: 'Quuxvillestadt',
    postalCode: 'QX9 8ZZ',
    region: 'Quuxshire',
    type: 'home',
  },
  email: { address: 'zq-unique@example.com', type: 'personal' },
  phone: { number: '+12175550199', type: 'mobile' },
}
const spouse = {
  externalContactId: 'ct-spouse',
  fullName: 'Marigold Quixoticson',
  isCustomerSelf: false,
  isMain: false,
  email: { address: 'marigold-q@example.com', type: 'personal' },
}

async function must(res: Promise<Response>, status: number, what: string) {
  const r = await res
  assert.equal(r.status, status, `${what}: ${r.body}`)
  return r
}
const call = (method: 'GET' | 'PUT' | 'POST' | 'PATCH', path: string, body?: unknown) =>
  t.call(method, `/v1/clients/${C}${path}`, { key: k.apiKey, ...(body === undefined ? {} : { body }) })

/** Every hit of `value` in any text, JSON or array column of any table: `table.column` once per row. */
async function hits(value: string): Promise<string[]> {
  const columns = await t.store.query<{ table_name: string; column_name: string }>(
    `SELECT c.table_name, c.column_name FROM information_schema.columns c
       JOIN information_schema.tables tb ON tb.table_schema = c.table_schema AND tb.table_name = c.table_name
      WHERE c.table_schema = 'public' AND tb.table_type = 'BASE TABLE'
        AND c.data_type IN ('text', 'character varying', 'character', 'json', 'jsonb', 'ARRAY')
      ORDER BY 1, 2`,
  )
  assert.ok(columns.length > 50, `${columns.length} columns`)
  const found: string[] = []
  for (const { table_name, column_name } of columns) {
    const rows = await t.store.query<{ n: string }>(
      `SELECT count(*) AS n FROM "${table_name}" WHERE strpos(lower("${column_name}"::text), lower($1)) > 0`,
      [value],
    )
    for (let i = 0; i < Number(rows[0]?.n ?? 0); i++) found.push(`${table_name}.${column_name}`)
  }
  return found
}

before(async () => {
  t = await startTestApp()
  k = await t.tenant(C)
  await payableReceivable(t, k, 'er-r')
  // pay-cust is responsible for er-r: it becomes the debtor with the distinctive data, then loses a contact.
  await must(call('PUT', '/customers/pay-cust', person([self, spouse])), 200, 'customer')
  await must(
    call('PUT', '/payment-requests/er-pr', {
      externalReceivableId: 'er-r',
      amount: usd('10.00'),
      description: 'Instalment for Zebulonius',
    }),
    201,
    'pr',
  )
  await must(call('PUT', '/customers/pay-cust', person([self], [{ type: 'hardship', reference: 'hardship-note-zq' }])), 200, 'contact gone')
  // The same Customer sent in a batch (its record keeps the body).
  await must(
    call('PUT', '/batches/er-b', {
      records: [
        {
          recordId: 'c',
          kind: 'customer',
          externalId: 'pay-cust',
          body: person([self], [{ type: 'hardship', reference: 'hardship-note-zq' }]),
        },
      ],
    }),
    202,
    'batch',
  )
  await t.app.batchRunner.drain()
  // An operator action whose details quoted the debtor (audit details are free-form: the erasure must find it).
  await t.store.query(
    `INSERT INTO audit_events (audit_event_id, client_code, actor, action, target_type, target_id, details, change_digest, occurred_at)
     VALUES ($1, $2, 'operator', 'support.note', 'customer', 'pay-cust', $3, 'x', now())`,
    [randomUUID(), C, JSON.stringify({ customerId: 'pay-cust', note: 'called zq-unique@example.com about 77 Xylophone Lane' })],
  )
})
after(() => t.close())

describe(`erasure of a Customer's personal data (${engineName})`, () => {
  test('202, then done within a worker turn; every personal value gone from every table; amounts, ids and holds kept', async () => {
    for (const value of PERSONAL) assert.ok((await hits(value)).length > 0, `control: ${value} is stored before the erasure`)
    const before = (await must(call('GET', '/customers/pay-cust'), 200, 'get')).json
    const request = (await must(call('GET', '/payment-requests/er-pr'), 200, 'pr')).json
    const receivable = (await must(call('GET', '/receivables/er-r'), 200, 'receivable')).json

    const first = await must(call('POST', '/customers/pay-cust/erasure'), 202, 'erase')
    assert.deepEqual(first.json, { externalCustomerId: 'pay-cust', status: 'pending', requestedAt: first.json.requestedAt, erasedAt: null })
    const again = await must(call('POST', '/customers/pay-cust/erasure'), 200, 'retry while pending')
    assert.deepEqual(again.json, first.json)
    // Already tombstoned in the request's transaction: the Customer's own row holds nothing personal.
    const read = await must(call('GET', '/customers/pay-cust'), 200, 'erased get')
    assert.deepEqual(read.json, { externalCustomerId: 'pay-cust', erased: true, erasedAt: first.json.requestedAt })

    assert.equal(await t.app.erasureWorkers.worker.runOnce(), true)
    assert.equal(await t.app.erasureWorkers.worker.runOnce(), false, 'nothing left')
    const done = await must(call('POST', '/customers/pay-cust/erasure'), 200, 'retry when done')
    assert.equal(done.json.status, 'done')
    assert.equal(typeof done.json.erasedAt, 'string')

    for (const value of PERSONAL) assert.deepEqual(await hits(value), [], `${value} is erased everywhere`)

    // Identifiers and amounts stay; the hardship restriction (a hold) stays too, without its reference.
    const afterRequest = (await must(call('GET', '/payment-requests/er-pr'), 200, 'pr')).json
    assert.deepEqual({ ...afterRequest, description: request.description }, request)
    assert.equal(afterRequest.description, 'erased')
    const afterReceivable = (await must(call('GET', '/receivables/er-r'), 200, 'receivable')).json
    assert.deepEqual(afterReceivable.recoverableAmount, receivable.recoverableAmount)
    assert.deepEqual(afterReceivable.responsibleCustomers, receivable.responsibleCustomers)
    assert.ok(afterReceivable.recovery.holds.includes('source_restriction'), JSON.stringify(afterReceivable.recovery))
    const restrictions = await t.store.query('SELECT type, reference FROM restrictions WHERE client_code = $1 AND subject_id = $2', [
      C,
      'pay-cust',
    ])
    assert.deepEqual(restrictions, [{ type: 'hardship', reference: null }])
    // The erasure is a new revision of the Customer on the change feed.
    const events = await t.store.query<{ type: string; revision: string }>(
      `SELECT type, revision FROM change_events WHERE client_code = $1 AND resource_type = 'customer' AND resource_id = 'pay-cust' ORDER BY seq DESC LIMIT 1`,
      [C],
    )
    assert.deepEqual(
      events.map((e) => [e.type, Number(e.revision)]),
      [['customer.updated', before.revision + 1]],
    )
    const list = (await must(call('GET', '/customers'), 200, 'list')).json
    assert.deepEqual(
      list.data.find((c: { externalCustomerId: string }) => c.externalCustomerId === 'pay-cust'),
      read.json,
    )
  })

  test('personal data for an erased Customer is refused (409 customer_erased) by PUT, PATCH and a batch record; nothing changes', async () => {
    const row = async () =>
      (
        await t.store.query(
          'SELECT revision, representation, erased_at FROM customers WHERE client_code = $1 AND external_customer_id = $2',
          [C, 'pay-cust'],
        )
      )[0]
    const kept = await row()
    const put = await call('PUT', '/customers/pay-cust', person([self]))
    assert.equal(put.status, 409, put.body)
    assert.equal(problemCode(put), 'customer_erased')
    const patch = await t.call('PATCH', `/v1/clients/${C}/customers/pay-cust`, {
      key: k.apiKey,
      rawBody: JSON.stringify({ name: { firstName: 'Zebulonius' } }),
      headers: { 'content-type': 'application/merge-patch+json' },
    })
    assert.equal(patch.status, 409, patch.body)
    assert.equal(problemCode(patch), 'customer_erased')
    await must(
      call('PUT', '/batches/er-b2', { records: [{ recordId: 'c', kind: 'customer', externalId: 'pay-cust', body: person([self]) }] }),
      202,
      'batch',
    )
    await t.app.batchRunner.drain()
    const batch = (await must(call('GET', '/batches/er-b2'), 200, 'batch')).json
    assert.equal(batch.status, 'failed', JSON.stringify(batch))
    assert.deepEqual(
      batch.records.map((r: { status: string; httpStatus: number; problem?: { type: string } }) => [
        r.status,
        r.httpStatus,
        r.problem?.type,
      ]),
      [['failed', 409, 'https://docs.irs.test/problems/customer_erased']],
    )
    assert.deepEqual(await row(), kept)
    // A Receivable may still name the erased Customer by its identifier.
    await must(call('GET', '/receivables/er-r'), 200, 'receivable')
  })

  test('an unknown Customer is 404 and records nothing', async () => {
    const res = await call('POST', '/customers/er-nobody/erasure')
    assert.equal(res.status, 404, res.body)
    assert.equal(problemCode(res), 'customer_not_found')
    assert.deepEqual(
      await t.store.query(`SELECT 1 FROM customer_erasures WHERE client_code = $1 AND external_customer_id = 'er-nobody'`, [C]),
      [],
    )
  })

  test('PERSONAL_DATA_RETENTION_DAYS: only Customers whose Receivables have all been closed that long', async () => {
    const customer = (id: string) =>
      call('PUT', `/customers/${id}`, { type: 'organization', name: { legalName: `Retained ${id} Holdings` }, sourceReference: `r/${id}` })
    const receivable = (id: string, cust: string) =>
      call('PUT', `/receivables/${id}`, {
        financialType: 'loan_balance',
        sourceRevision: 1,
        recoverableAmount: usd('5.00'),
        creditUnion: { loanAccountReference: `loan/${id}`, loanType: 'auto' },
        dueDate: '2026-01-01',
        responsibleCustomers: [{ externalCustomerId: cust, role: 'primary' }],
        sourceReference: `rcv/${id}`,
      })
    for (const id of ['old', 'recent', 'open', 'none']) await must(customer(`ret-${id}`), 201, id)
    for (const id of ['old', 'recent', 'open']) await must(receivable(`rr-${id}`, `ret-${id}`), 201, id)
    await must(call('POST', '/receivables/rr-old/close', { effectiveAt: '2020-01-01T00:00:00Z', reason: 'settled' }), 200, 'close old')
    await must(
      call('POST', '/receivables/rr-recent/close', { effectiveAt: new Date().toISOString(), reason: 'settled' }),
      200,
      'close recent',
    )
    assert.equal(await t.app.erasureWorkers.retain(30), 1)
    assert.equal(await t.app.erasureWorkers.retain(30), 0, 'recorded once')
    await t.app.erasureWorkers.worker.runOnce()
    const erased = await t.store.query<{ external_customer_id: string; cause: string; status: string }>(
      `SELECT external_customer_id, cause, status FROM customer_erasures WHERE client_code = $1 AND external_customer_id LIKE 'ret-%'`,
      [C],
    )
    assert.deepEqual(erased, [{ external_customer_id: 'ret-old', cause: 'retention', status: 'done' }])
    assert.deepEqual(await hits('Retained ret-old Holdings'), [])
    assert.ok((await hits('Retained ret-recent Holdings')).length > 0)
  })

  test('a lease left by a dead worker expires and another worker finishes the erasure; two workers never share one', async () => {
    for (let i = 0; i < 16; i++) {
      await must(
        call('PUT', `/customers/lease-${i}`, { type: 'organization', name: { legalName: `Lease ${i} Ltd` }, sourceReference: `l/${i}` }),
        201,
        'c',
      )
      await must(call('POST', `/customers/lease-${i}/erasure`), 202, 'erase')
    }
    // A worker that claimed lease-0 and died (its lease still running): nobody else takes it until it expires.
    await t.store.query(
      `UPDATE customer_erasures SET lease_token = $2, lease_expires_at = now() + interval '1 hour' WHERE client_code = $1 AND external_customer_id = 'lease-0'`,
      [C, randomUUID()],
    )
    const w = t.app.erasureWorkers.worker
    await Promise.all([w.runOnce(), w.runOnce()])
    while (await w.runOnce()) {}
    const pending = async () =>
      (
        await t.store.query<{ id: string }>(
          `SELECT external_customer_id AS id FROM customer_erasures WHERE client_code = $1 AND status = 'pending'`,
          [C],
        )
      ).map((r) => r.id)
    assert.deepEqual(await pending(), ['lease-0'])
    await t.store.query(`UPDATE customer_erasures SET lease_expires_at = now() - interval '1 second' WHERE client_code = $1`, [C])
    assert.equal(await w.runOnce(), true)
    assert.deepEqual(await pending(), [])
    for (let i = 0; i < 16; i++) assert.deepEqual(await hits(`Lease ${i} Ltd`), [], `lease-${i}`)
  })
})
