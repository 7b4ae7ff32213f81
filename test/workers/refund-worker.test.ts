import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import type { PaymentProvider, ProviderRefund, RefundRequest } from '../../src/resources/payments/provider.ts'
import { createSandboxProvider } from '../../src/resources/payments/sandbox/provider.ts'
import { recordRefundOutcome } from '../../src/resources/refunds/rules.ts'
import { inUnitOfWork } from '../../src/resources/unit-of-work.ts'
import { createRefundWorker, REFUND_LEASE_MS } from '../../src/workers/refund-worker.ts'
import { startTestApp, type Tenant, type TestApp } from '../helpers/app.ts'
import { confirmedPayment, expectStatus, refundCalls, usd } from '../resources/refunds/helpers.ts'

/**
 * The refund worker (src/workers/refund-worker.ts) on both stores: the provider asked outside any transaction under
 * one idempotency key per refund, a claim whose holder stopped (a killed process: its provider call never returns)
 * taken again once its lease expires, the stale holder's late answer changing nothing, a provider that does not
 * answer asked again after a backoff, and a provider that decides later.
 */
let nowMs = Date.parse('2026-03-02T10:00:00.000Z')
const clock = { now: () => new Date(nowMs) }

let t: TestApp
let n = 0
before(async () => {
  t = await startTestApp({}, { clock })
})
after(() => t.close())

async function client(): Promise<Tenant> {
  n += 1
  return t.tenant(`rfw${n}`)
}

/** A provider that records every call and answers through `answer` (the sandbox's answer by default). */
function recordingProvider(answer?: (r: RefundRequest) => Promise<ProviderRefund>) {
  const sandbox = createSandboxProvider()
  const calls: RefundRequest[] = []
  const provider: PaymentProvider = {
    ...sandbox,
    refund(r) {
      calls.push(r)
      return answer ? answer(r) : sandbox.refund(r)
    },
  }
  return { provider, calls }
}

const errors: unknown[] = []
const worker = (provider: PaymentProvider, at: () => number = () => nowMs) =>
  createRefundWorker({ store: t.store, clock: { now: () => new Date(at()) }, provider, onError: (e) => errors.push(e) })

test('a claim whose holder stopped mid-call is taken again once its lease expires; the stale answer changes nothing', async () => {
  const tenant = await client()
  const c = refundCalls(t, tenant)
  await confirmedPayment(t, tenant, 'R', 'pr-1')
  expectStatus(await c.refund('pr-1', 'rf-1', { amount: usd('25.00'), reason: 'requested_by_customer' }), 201)

  // The first worker claims the refund and its provider call hangs: the process is as good as killed.
  let release: (r: ProviderRefund) => void = () => {}
  let called: () => void = () => {}
  const asked = new Promise<void>((resolve) => {
    called = resolve
  })
  const stuck = recordingProvider(
    () =>
      new Promise<ProviderRefund>((resolve) => {
        release = resolve
        called()
      }),
  )
  const first = worker(stuck.provider).runOnce()
  await asked
  // Before the lease expires nobody takes it.
  const healthy = recordingProvider()
  assert.equal(await worker(healthy.provider, () => nowMs + REFUND_LEASE_MS - 1).runOnce(), false)
  assert.equal(healthy.calls.length, 0)
  assert.deepEqual(await c.payment('pr-1'), ['60.00', '60.00', '0.00', '0.00', '0.00'])

  // Once it has expired, another worker takes it and asks again under the same idempotency key.
  assert.equal(await worker(healthy.provider, () => nowMs + REFUND_LEASE_MS).runOnce(), true)
  assert.equal(healthy.calls.length, 1)
  assert.equal(healthy.calls[0]?.idempotencyKey, stuck.calls[0]?.idempotencyKey)
  assert.equal(healthy.calls[0]?.idempotencyKey, `refund/${tenant.clientCode}/pr-1/rf-1`)
  assert.deepEqual(await c.payment('pr-1'), ['60.00', '60.00', '0.00', '25.00', '0.00'])
  assert.deepEqual(await c.position('R'), ['100.00', '65.00', '35.00', '0.00'])
  const feed = await c.feed()

  // The stale worker's provider answers at last: its claim is gone, so nothing changes.
  release({ providerRefundId: 'late', status: 'succeeded' })
  assert.equal(await first, true)
  assert.deepEqual(await c.payment('pr-1'), ['60.00', '60.00', '0.00', '25.00', '0.00'])
  assert.deepEqual(await c.position('R'), ['100.00', '65.00', '35.00', '0.00'])
  assert.deepEqual(await c.feed(), feed)
  const attempts = await t.store.query<{ attempts: number; provider_refund_id: string }>(
    `SELECT attempts, provider_refund_id FROM refunds WHERE client_code = $1`,
    [tenant.clientCode],
  )
  assert.equal(attempts[0]?.attempts, 2)
  assert.match(String(attempts[0]?.provider_refund_id), /^sbx_re_[0-9a-f]{29}$/)
})

test('a provider that does not answer: the refund is asked again after the backoff, not before', async () => {
  const tenant = await client()
  const c = refundCalls(t, tenant)
  await confirmedPayment(t, tenant, 'R', 'pr-1')
  expectStatus(await c.refund('pr-1', 'rf-1', { amount: usd('10.00'), reason: 'other' }), 201)
  let down = true
  const flaky = recordingProvider(async (r) => {
    if (down) throw new Error('provider unreachable')
    return createSandboxProvider().refund(r)
  })
  const w = worker(flaky.provider)
  errors.length = 0
  assert.equal(await w.runOnce(), true)
  assert.deepEqual(
    errors.map((e) => (e as Error).message),
    ['provider unreachable'],
  )
  assert.equal(expectStatus(await c.getRefund('pr-1', 'rf-1'), 200).json.status, 'pending')
  // The first retry waits 5 s.
  nowMs += 4999
  assert.equal(await w.runOnce(), false)
  nowMs += 1
  down = false
  assert.equal(await w.runOnce(), true)
  assert.equal(flaky.calls.length, 2)
  assert.equal(expectStatus(await c.getRefund('pr-1', 'rf-1'), 200).json.status, 'succeeded')
  assert.deepEqual(await c.payment('pr-1'), ['60.00', '60.00', '0.00', '10.00', '0.00'])
})

test('a provider that decides later: pending is kept, not asked again, and its decision is recorded once', async () => {
  const tenant = await client()
  const c = refundCalls(t, tenant)
  await confirmedPayment(t, tenant, 'R', 'pr-1')
  expectStatus(await c.refund('pr-1', 'rf-1', { amount: usd('10.00'), reason: 'other' }), 201)
  const later = recordingProvider(async () => ({ providerRefundId: 're_later_1', status: 'pending' }))
  const w = worker(later.provider)
  assert.equal(await w.runOnce(), true)
  assert.equal(await w.runOnce(), false)
  assert.equal(later.calls.length, 1)
  assert.equal(expectStatus(await c.getRefund('pr-1', 'rf-1'), 200).json.status, 'pending')
  assert.deepEqual(await c.payment('pr-1'), ['60.00', '60.00', '0.00', '0.00', '0.00'])
  // The provider's event decides it (no claim): the money moves once; a second delivery of the event changes nothing.
  const key = { clientCode: tenant.clientCode, requestId: 'pr-1', refundId: 'rf-1', token: null }
  const decide = () =>
    inUnitOfWork(t.store, (uow) =>
      recordRefundOutcome(uow, key, { providerRefundId: 're_later_1', status: 'succeeded' }, clock.now().toISOString()),
    )
  assert.equal((await decide())?.status, 'succeeded')
  assert.equal(await decide(), undefined)
  assert.deepEqual(await c.payment('pr-1'), ['60.00', '60.00', '0.00', '10.00', '0.00'])
  assert.deepEqual(await c.position('R'), ['100.00', '50.00', '50.00', '0.00'])
})

test('the app’s worker, started, is woken by the refund PUT', async () => {
  const tenant = await client()
  const c = refundCalls(t, tenant)
  await confirmedPayment(t, tenant, 'R', 'pr-1')
  const w = t.app.refundWorker
  w.start()
  try {
    // The first turn at start finds nothing; the PUT's wake-up brings the next one, long before the 5 s interval.
    await new Promise((resolve) => setImmediate(resolve))
    expectStatus(await c.refund('pr-1', 'rf-1', { amount: usd('10.00'), reason: 'other' }), 201)
    for (let i = 0; i < 200; i++) {
      if (expectStatus(await c.getRefund('pr-1', 'rf-1'), 200).json.status !== 'pending') break
      await new Promise((resolve) => setTimeout(resolve, 10))
    }
  } finally {
    await w.stop()
  }
  assert.equal(expectStatus(await c.getRefund('pr-1', 'rf-1'), 200).json.status, 'succeeded')
})
