import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { seedDemo } from '../../src/seed.ts'
import { startTestApp, type TestApp } from '../helpers/app.ts'

/**
 * The OpenAPI document's examples are the sandbox demo: every request example, sent as is to a freshly
 * seeded demo client in dependency order, is accepted, and every response example is what the service
 * answers (timestamps aside). A schema without an example fails here.
 */

let t: TestApp
let key: string
// biome-ignore lint/suspicious/noExplicitAny: the document is inspected structurally
let doc: any
before(async () => {
  // Webhook destinations resolve through a stub: the example's host name answers a public address.
  t = await startTestApp({}, { resolver: async () => [{ address: '93.184.215.14', family: 4 }] })
  const seeded = await seedDemo(t.store, t.app)
  assert.ok(seeded, 'a fresh database is seeded')
  key = seeded.apiKey
  const res = await t.call('GET', '/v1/openapi.json')
  assert.equal(res.status, 200)
  doc = res.json
})
after(() => t.close())

const demo = '/v1/clients/demo'

type Json = Record<string, unknown>
const componentName = (schema: { $ref?: string } | undefined) => schema?.$ref?.replace('#/components/schemas/', '')
const component = (name: string): Json => {
  const c = doc.components.schemas[name]
  assert.ok(c, `component ${name}`)
  return c
}
const examplesOf = (name: string): unknown[] => (component(name).examples as unknown[] | undefined) ?? []
const firstExample = (name: string) => {
  const list = examplesOf(name)
  assert.ok(list.length > 0, `${name} has an example`)
  return list[0] as Json
}

interface Operation {
  path: string
  method: string
  op: {
    operationId: string
    requestBody?: { content: Record<string, { schema: { $ref?: string } }> }
    responses: Record<string, { content?: Record<string, { schema: { $ref?: string } }> }>
  }
}
const operations = (): Operation[] =>
  Object.entries(doc.paths as Record<string, Record<string, Operation['op']>>).flatMap(([path, ops]) =>
    Object.entries(ops).map(([method, op]) => ({ path, method, op })),
  )
const requestSchemaOf = (o: Operation) => componentName(Object.values(o.op.requestBody?.content ?? {})[0]?.schema)
const successSchemasOf = (o: Operation) =>
  Object.entries(o.op.responses).flatMap(([status, r]) => {
    const name = Number(status) < 300 ? componentName(r.content?.['application/json']?.schema) : undefined
    return name ? [[Number(status), name] as const] : []
  })
const routeOf = (operationId: string) => {
  const route = t.app.routes.find((r) => r.operationId === operationId)
  assert.ok(route, operationId)
  return route
}

/** Server-assigned times differ from run to run; everything else must match exactly. */
const SERVER_TIMES = new Set([
  'acceptedAt',
  'updatedAt',
  'recordedAt',
  'submittedAt',
  'completedAt',
  'occurredAt',
  'flaggedAt',
  'resolvedAt',
])
function withoutServerTimes(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withoutServerTimes)
  if (!value || typeof value !== 'object') return value
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, SERVER_TIMES.has(k) ? '<server time>' : withoutServerTimes(v)]))
}

describe('every request and response schema carries an example', () => {
  test('each request body and each success response of the public document names a schema with at least one example', () => {
    const missing: string[] = []
    let requests = 0
    let responses = 0
    for (const o of operations()) {
      const request = requestSchemaOf(o)
      if (o.op.requestBody) {
        requests++
        if (!request || examplesOf(request).length === 0) missing.push(`${o.op.operationId} request ${request}`)
      }
      for (const [status, name] of successSchemasOf(o)) {
        responses++
        if (examplesOf(name).length === 0) missing.push(`${o.op.operationId} ${status} ${name}`)
      }
    }
    assert.deepEqual(missing, [])
    const publicRoutes = t.app.routes.filter((r) => r.public)
    assert.equal(requests, publicRoutes.filter((r) => r.body).length)
    assert.equal(responses, publicRoutes.flatMap((r) => Object.values(r.responses).filter((x) => x.schema)).length)
    assert.ok(requests > 0 && responses > requests)
  })

  test('each request example validates against the Zod schema its route parses', () => {
    for (const o of operations()) {
      const name = requestSchemaOf(o)
      if (!name) continue
      const schema = routeOf(o.op.operationId).body?.schema
      assert.ok(schema, `${o.op.operationId} has a body schema`)
      for (const example of examplesOf(name)) {
        const parsed = schema.safeParse(example)
        assert.ok(parsed.success, `${o.op.operationId}: ${JSON.stringify(parsed.error?.issues)}`)
      }
    }
  })

  test('each response example validates against its response schema and loses nothing to the allowlist', () => {
    for (const o of operations()) {
      const route = routeOf(o.op.operationId)
      for (const [status, name] of successSchemasOf(o)) {
        const schema = route.responses[status]?.schema
        assert.ok(schema, `${o.op.operationId} ${status}`)
        for (const example of examplesOf(name)) {
          const parsed = schema.safeParse(example)
          assert.ok(parsed.success, `${o.op.operationId} ${status} ${name}: ${JSON.stringify(parsed.error?.issues)}`)
          assert.deepEqual(parsed.data, example, `${name}: the example has no field the response would drop`)
        }
      }
    }
  })
})

describe('the request examples, sent as is to the freshly seeded demo', () => {
  test('the seeded Customer and Receivable are the response examples', async () => {
    const customer = await t.call('GET', `${demo}/customers/cust-demo-1`, { key })
    assert.equal(customer.status, 200)
    assert.deepEqual(withoutServerTimes(customer.json), withoutServerTimes(firstExample('Customer')))
    const receivable = await t.call('GET', `${demo}/receivables/rcv-demo-1`, { key })
    assert.equal(receivable.status, 200)
    assert.deepEqual(withoutServerTimes(receivable.json), withoutServerTimes(firstExample('Receivable')))
    assert.deepEqual(receivable.json.financialPosition, {
      sourceAmount: { amount: '1250.00', currency: 'USD' },
      workingAmount: { amount: '1250.00', currency: 'USD' },
      confirmedUnreconciledAmount: { amount: '0.00', currency: 'USD' },
      receiptAcknowledgedAmount: { amount: '0.00', currency: 'USD' },
    })
    const list = await t.call('GET', `${demo}/receivables`, { key })
    assert.deepEqual(withoutServerTimes(list.json), withoutServerTimes(firstExample('ReceivableList')))
    const customers = await t.call('GET', `${demo}/customers`, { key })
    assert.deepEqual(withoutServerTimes(customers.json), withoutServerTimes(firstExample('CustomerList')))
    // Event ids are random; the feed's order, types, revisions and cursor are not.
    const withoutIds = (page: { data: Json[] }) => ({ ...page, data: page.data.map((e) => ({ ...e, eventId: '<uuid>' })) })
    const changes = await t.call('GET', `${demo}/changes`, { key })
    assert.equal(changes.status, 200)
    assert.deepEqual(
      withoutServerTimes(withoutIds(changes.json)),
      withoutServerTimes(withoutIds(firstExample('ChangePage') as { data: Json[] })),
    )
    const summary = await t.call('GET', `${demo}/collection-summary`, { key })
    assert.equal(summary.status, 200)
    assert.deepEqual({ ...summary.json, asOf: '<now>' }, { ...firstExample('CollectionSummary'), asOf: '<now>' })
  })

  test('seeding again changes nothing', async () => {
    assert.equal(await seedDemo(t.store, t.app), null)
    const rows = await t.store.query<{ n: number }>(`SELECT count(*)::int AS n FROM receivables WHERE client_code = 'demo'`)
    assert.equal(rows[0]?.n, 1)
    const receivable = await t.call('GET', `${demo}/receivables/rcv-demo-1`, { key })
    assert.equal(receivable.json.revision, 1)
  })

  test('every request example is accepted, in dependency order, and answers its response example', async () => {
    // operationId, path, expected status, and whether the answer is exactly the response example.
    const plan: [string, string, number, boolean][] = [
      ['putCustomer', `${demo}/customers/cust-demo-1`, 200, true],
      ['patchCustomer', `${demo}/customers/cust-demo-1`, 200, false],
      ['putReceivable', `${demo}/receivables/rcv-demo-1`, 200, true],
      ['putBatch', `${demo}/batches/batch-demo-1`, 202, false],
      // The preview of the declaration below: what it will flag and release (nothing), changing nothing.
      ['previewBookCompletion', `${demo}/book-completions/preview`, 200, true],
      ['putBookCompletion', `${demo}/book-completions/book-demo-1`, 201, true],
      ['putAdjustment', `${demo}/adjustments/adj-demo-1`, 201, true],
      ['putCreditNote', `${demo}/credit-notes/cn-demo-1`, 201, true],
      ['putWriteOff', `${demo}/write-offs/wo-demo-1`, 201, true],
      ['putPaymentObservation', `${demo}/payment-observations/pay-demo-1`, 201, true],
      ['putBalanceSnapshot', `${demo}/balance-snapshots/snap-demo-1`, 201, true],
      ['putRecoveryInstruction', `${demo}/recovery-instructions/instr-demo-1`, 201, true],
      // Collection is enabled first (below): a Payment request needs a Receivable free of holds. Not exact: the
      // hosted page's token and the expiry are new on every run.
      ['putPaymentRequest', `${demo}/payment-requests/payreq-demo-1`, 201, false],
      // A second request (made just before, below) canceled with each example body: 200, then 200 unchanged.
      ['cancelPaymentRequest', `${demo}/payment-requests/payreq-demo-2/cancel`, 200, false],
      ['pauseReceivable', `${demo}/receivables/rcv-demo-1/pause`, 200, false],
      ['resumeReceivable', `${demo}/receivables/rcv-demo-1/resume`, 200, false],
      ['closeReceivable', `${demo}/receivables/rcv-demo-1/close`, 200, false],
      ['reopenReceivable', `${demo}/receivables/rcv-demo-1/reopen`, 200, false],
      // The confirmed demo Payment (simulated below) reconciled with a line that differs: held, not the
      // example (which shows it resolved); the resolution then answers the example exactly.
      ['putPaymentReconciliation', `${demo}/payment-reconciliations/rec-demo-1`, 201, false],
      ['putPaymentReconciliationResolution', `${demo}/payment-reconciliations/rec-demo-1/resolution`, 200, true],
      // A refund of the confirmed demo Payment, pending (no refund worker runs here). Not exact: createdAt is now.
      ['putRefund', `${demo}/payment-requests/payreq-demo-1/refunds/refund-demo-1`, 201, false],
      // Not exact: the signing secret is new on every run; the replay queues what the feed holds.
      ['putWebhookEndpoint', `${demo}/webhook-endpoint`, 201, false],
      ['replayWebhookNotifications', `${demo}/webhook-endpoint/replay`, 202, false],
      // Not exact: the signing secret is new on every PUT. The example's confirmation code is not the one the test
      // receipt carried (each PUT derives a new one from its new secret), so it is refused: 422 custom.
      ['putReceiptRoute', `${demo}/receipt-route`, 201, false],
      ['confirmReceiptRoute', `${demo}/receipt-route/confirm`, 422, false],
    ]
    const withBody = operations()
      .filter((o) => o.op.requestBody)
      .map((o) => o.op.operationId)
      .sort()
    assert.deepEqual(plan.map(([id]) => id).sort(), withBody, 'the plan sends every request example')

    const byId = new Map(operations().map((o) => [o.op.operationId, o]))
    for (const [operationId, url, status, exact] of plan) {
      const o = byId.get(operationId) as Operation
      if (operationId === 'putPaymentRequest') {
        assert.equal((await t.admin('PUT', '/admin/v1/clients/demo', { collectionEnabled: true })).status, 200)
        // The demo's Receivables reach the toggle in the background.
        await t.app.clientFanout.runUntilIdle()
      }
      if (operationId === 'cancelPaymentRequest') {
        const made = await t.call('PUT', `${demo}/payment-requests/payreq-demo-2`, {
          key,
          body: { externalReceivableId: 'rcv-demo-1', amount: { amount: '1.00', currency: 'USD' } },
        })
        assert.equal(made.status, 201, made.body)
      }
      const request = requestSchemaOf(o) as string
      for (const body of examplesOf(request)) {
        const res = await t.call(o.method.toUpperCase() as 'PUT', url, {
          key,
          body,
          contentType: Object.keys(o.op.requestBody?.content ?? {})[0] as string,
        })
        assert.equal(res.status, status, `${operationId}: ${res.body}`)
        if (exact) {
          const name = successSchemasOf(o).find(([s]) => s === status)?.[1] as string
          assert.deepEqual(withoutServerTimes(res.json), withoutServerTimes(firstExample(name)), operationId)
        }
      }
      const lifecycle: Record<string, string> = {
        pauseReceivable: 'paused',
        resumeReceivable: 'active',
        closeReceivable: 'closed',
        reopenReceivable: 'active',
      }
      if (lifecycle[operationId]) {
        const now = await t.call('GET', `${demo}/receivables/rcv-demo-1`, { key })
        assert.equal(now.json.status, lifecycle[operationId], operationId)
      }
      if (operationId === 'putPaymentRequest') {
        const simulate = await t.admin('POST', '/admin/v1/clients/demo/payment-requests/payreq-demo-1/simulate', { outcome: 'confirmed' })
        assert.equal(simulate.status, 201, simulate.body)
      }
      if (operationId === 'putPaymentReconciliation') {
        const held = await t.call('GET', `${demo}/payment-reconciliations/rec-demo-1`, { key })
        assert.equal(held.json.status, 'held')
      }
      if (operationId === 'putBatch') {
        await t.app.batchRunner.drain()
        const batch = await t.call('GET', `${demo}/batches/batch-demo-1`, { key })
        assert.equal(batch.status, 200)
        assert.deepEqual(withoutServerTimes(batch.json), withoutServerTimes(firstExample('Batch')))
      }
    }

    // The story's end: 1250.00 less the three corrections is 1140.00; the snapshot then says 990.00.
    const receivable = await t.call('GET', `${demo}/receivables/rcv-demo-1`, { key })
    assert.equal(receivable.json.status, 'active')
    assert.deepEqual(receivable.json.financialPosition.sourceAmount, { amount: '990.00', currency: 'USD' })
    const freshness = await t.call('GET', `${demo}/source-freshness`, { key })
    assert.deepEqual(
      withoutServerTimes({ ...freshness.json, lastReceivedAt: 'x', lastSnapshotAt: 'x' }),
      withoutServerTimes({ ...firstExample('SourceFreshness'), lastReceivedAt: 'x', lastSnapshotAt: 'x' }),
    )
  })
})

describe('the document says what the service enforces', () => {
  /** Keeps only the required fields, following $refs, from a full example. */
  function requiredOnly(schema: Json, value: unknown): unknown {
    const ref = componentName(schema as { $ref?: string })
    if (ref) return requiredOnly(component(ref), value)
    if (Array.isArray(value)) return value.map((v) => requiredOnly((schema.items ?? {}) as Json, v))
    if (schema.type !== 'object' || !schema.properties || !value || typeof value !== 'object') return value
    const properties = schema.properties as Record<string, Json>
    const required = (schema.required ?? []) as string[]
    return Object.fromEntries(
      required.map((k) => {
        assert.ok(k in value, `the example has the required ${k}`)
        return [k, requiredOnly(properties[k] as Json, (value as Json)[k])]
      }),
    )
  }

  test('ReceivableWrite requires creditUnion, and a body of its required fields alone is accepted', async () => {
    const schema = component('ReceivableWrite')
    assert.deepEqual(schema.required, [
      'financialType',
      'sourceRevision',
      'recoverableAmount',
      'creditUnion',
      'dueDate',
      'responsibleCustomers',
      'sourceReference',
    ])
    const body = requiredOnly(schema, firstExample('ReceivableWrite')) as Json
    assert.deepEqual(body, {
      financialType: 'accelerated_balance',
      sourceRevision: 3,
      recoverableAmount: { amount: '1250.00', currency: 'USD' },
      creditUnion: { loanAccountReference: 'ledger/loans/demo-1', loanType: 'auto' },
      dueDate: '2026-02-01',
      responsibleCustomers: [{ externalCustomerId: 'cust-demo-1', role: 'primary' }],
      sourceReference: 'ledger/receivables/demo-1',
    })
    const created = await t.call('PUT', `${demo}/receivables/rcv-demo-minimal`, { key, body })
    assert.equal(created.status, 201, created.body)
    // And the one the document marks required but Zod leaves to the service: refused, with its own code.
    const { creditUnion: _context, ...withoutContext } = body
    const refused = await t.call('PUT', `${demo}/receivables/rcv-demo-minimal-2`, { key, body: withoutContext })
    assert.equal(refused.status, 422)
    assert.equal(refused.json.type, 'https://docs.irs.test/problems/profile_mismatch')
    assert.deepEqual(refused.json.errors, [
      { code: 'profile_mismatch', detail: 'required by industry profile credit_union', pointer: '/creditUnion' },
    ])
  })
})

describe('amounts in error details are decimal, with their currency', () => {
  test('a balance breakdown that does not sum to recoverableAmount says both sums in USD', async () => {
    const example = firstExample('ReceivableWrite') as { balanceBreakdown: Json }
    const body = {
      ...example,
      recoverableAmount: { amount: '200', currency: 'USD' },
      balanceBreakdown: {
        costs: { amount: '0', currency: 'USD' },
        fees: { amount: '25', currency: 'USD' },
        interest: { amount: '0', currency: 'USD' },
        principal: { amount: '200.00', currency: 'USD' },
      },
    }
    const res = await t.call('PUT', `${demo}/receivables/rcv-demo-breakdown`, { key, body })
    assert.equal(res.status, 422)
    assert.deepEqual(res.json.errors, [
      {
        code: 'custom',
        detail: 'must sum exactly to recoverableAmount: the breakdown sums to 225.00 USD but recoverableAmount is 200.00 USD',
        pointer: '/balanceBreakdown',
      },
    ])
  })

  test('allocations above the observed amount say both sums in USD', async () => {
    const example = firstExample('PaymentObservationWrite')
    const body = {
      ...example,
      amount: { amount: '100.5', currency: 'USD' },
      allocations: [{ amount: { amount: '120', currency: 'USD' }, externalReceivableId: 'rcv-demo-1' }],
    }
    const res = await t.call('PUT', `${demo}/payment-observations/pay-demo-units`, { key, body })
    assert.equal(res.status, 422)
    assert.deepEqual(res.json.errors, [
      {
        code: 'custom',
        detail: 'must not allocate more than the amount: the allocations sum to 120.00 USD but amount is 100.50 USD',
        pointer: '/allocations',
      },
    ])
  })

  test('a correction that would take the source amount below zero says the amount in USD', async () => {
    const receivable = await t.call('PUT', `${demo}/receivables/rcv-demo-units`, { key, body: firstExample('ReceivableWrite') })
    assert.equal(receivable.status, 201)
    const body = {
      ...firstExample('WriteOffWrite'),
      externalReceivableId: 'rcv-demo-units',
      amount: { amount: '1250.01', currency: 'USD' },
    }
    const res = await t.call('PUT', `${demo}/write-offs/wo-demo-units`, { key, body })
    assert.equal(res.status, 422)
    assert.deepEqual(res.json.errors, [
      { code: 'custom', detail: 'would take the source amount below zero (it is 1250.00 USD)', pointer: '/amount/amount' },
    ])
  })
})
