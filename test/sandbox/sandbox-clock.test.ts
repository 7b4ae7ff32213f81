import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { RESET_KEEPS } from '../../src/admin/store.ts'
import { sweepExpiredPaymentRequests } from '../../src/resources/payment-requests/expiry.ts'
import { runRetention } from '../../src/resources/retention/service.ts'
import { durationMs } from '../../src/sandbox/schema.ts'
import { startTestApp, type Tenant, type TestApp } from '../helpers/app.ts'
import { payableReceivable } from '../helpers/payments.ts'
import { engineName } from '../helpers/store.ts'
import { type Receiver, startReceiver } from '../helpers/webhook-receiver.ts'

/**
 * The sandbox clock (docs/decisions.md, "Sandbox clock") through the real app and store. The base clock is
 * moved by hand, so every time is an exact value; no test waits for a timer.
 */
let realMs = Date.parse('2026-03-02T10:00:00.000Z')
const baseClock = { now: () => new Date(realMs) }
const iso = (ms: number) => new Date(ms).toISOString()
const MINUTE = 60_000
const HOUR = 60 * MINUTE
const DAY = 24 * HOUR

let t: TestApp
let rx: Receiver

before(async () => {
  t = await startTestApp({ WEBHOOK_DEV_ALLOW_LOOPBACK: '1', WEBHOOK_RETRY_SCHEDULE: '1m,5m,30m' }, { clock: baseClock })
  rx = await startReceiver()
})
after(async () => {
  await t.app.webhookDispatcher.stop()
  await rx.close()
  await t.close()
})

const clockPath = (client: string) => `/admin/v1/clients/${client}/sandbox-clock`
const readClock = (client: string) => t.admin('GET', clockPath(client))
const advance = (client: string, body: unknown) => t.admin('POST', `${clockPath(client)}/advance`, body)
const resetClock = (client: string) => t.admin('POST', `${clockPath(client)}/reset`, {})

/** The problem code of a problem+json answer (the last segment of its `type`). */
const code = (res: { json?: { type?: string } }) => res.json?.type?.split('/').pop()

function ok<T extends { status: number; body: string }>(res: T, status = 200): T {
  assert.equal(res.status, status, res.body)
  return res
}

const customer = (n: number) => ({ type: 'person', name: { firstName: 'Ada', lastName: `L${n}` }, sourceReference: `sc/c/${n}` })
async function putCustomer(k: Tenant, id: string, n = 1) {
  return t.call('PUT', `/v1/clients/${k.clientCode}/customers/${id}`, { key: k.apiKey, body: customer(n) })
}

/** The change feed of a client, as `type resourceId revision occurredAt` lines in feed order. */
async function feed(client: string, types?: string[]) {
  const rows = await t.store.query<{ type: string; resource_id: string; revision: string; occurred_at: string }>(
    `SELECT type, resource_id, revision, occurred_at FROM change_events WHERE client_code = $1 ORDER BY seq`,
    [client],
  )
  return rows.filter((r) => !types || types.includes(r.type)).map((r) => `${r.type} ${r.resource_id} ${r.revision} ${r.occurred_at}`)
}

async function audit(client: string, action: string) {
  const res = ok(await t.admin('GET', `/admin/v1/audit-events?clientCode=${client}&limit=200`))
  // biome-ignore lint/suspicious/noExplicitAny: audit events are compared field by field
  return res.json.data.filter((e: any) => e.action === action).map((e: any) => ({ occurredAt: e.occurredAt, details: e.details }))
}

describe(`sandbox clock: read, advance, never backwards, reset (${engineName})`, () => {
  test('a client starts on real time; advancing stops the clock there; reset puts it back on real time', async () => {
    const k = await t.tenant('sc-basic')
    assert.deepEqual(ok(await readClock('sc-basic')).json, { clientCode: 'sc-basic', mode: 'real_time', now: iso(realMs), updatedAt: null })

    const start = realMs
    const byHour = ok(await advance('sc-basic', { by: 'PT1H' }))
    assert.deepEqual(byHour.json, { clientCode: 'sc-basic', mode: 'frozen', now: iso(start + HOUR), updatedAt: iso(start) })

    // Real time goes on; the client's clock stands still.
    realMs += 5 * MINUTE
    assert.deepEqual(ok(await readClock('sc-basic')).json, {
      clientCode: 'sc-basic',
      mode: 'frozen',
      now: iso(start + HOUR),
      updatedAt: iso(start),
    })
    // What the client writes is stamped with its clock.
    const created = ok(await putCustomer(k, 'c-1'), 201)
    assert.equal(created.json.updatedAt, iso(start + HOUR))

    // To an instant: the same instant is allowed (it is not backwards), a later one moves it.
    assert.equal(ok(await advance('sc-basic', { to: iso(start + HOUR) })).json.now, iso(start + HOUR))
    const to = ok(await advance('sc-basic', { to: '2026-04-01T00:00:00Z' }))
    assert.deepEqual(to.json, { clientCode: 'sc-basic', mode: 'frozen', now: '2026-04-01T00:00:00.000Z', updatedAt: iso(realMs) })
    // By a duration, from where the clock stands (not from real time).
    assert.equal(ok(await advance('sc-basic', { by: 'P1W2DT3H4M5.5S' })).json.now, '2026-04-10T03:04:05.500Z')
    assert.equal(ok(await advance('sc-basic', { by: 'PT0S' })).json.now, '2026-04-10T03:04:05.500Z')

    const back = await advance('sc-basic', { to: '2026-04-10T03:04:05.499Z' })
    assert.equal(back.status, 409, back.body)
    assert.equal(code(back), 'sandbox_clock_backwards')
    assert.equal(back.json.now, '2026-04-10T03:04:05.500Z')
    assert.equal(
      back.json.detail,
      'The clock of client sc-basic shows 2026-04-10T03:04:05.500Z; it cannot go back to 2026-04-10T03:04:05.499Z. Advance to 2026-04-10T03:04:05.500Z or later, or reset it to real time.',
    )
    // Refused: nothing moved.
    assert.equal(ok(await readClock('sc-basic')).json.now, '2026-04-10T03:04:05.500Z')

    const reset = ok(await resetClock('sc-basic'))
    assert.deepEqual(reset.json, { clientCode: 'sc-basic', mode: 'real_time', now: iso(realMs), updatedAt: null })
    // Idempotent.
    assert.deepEqual(ok(await resetClock('sc-basic')).json, reset.json)
    // Back on real time, a write is stamped with real time again.
    assert.equal(ok(await putCustomer(k, 'c-2', 2), 201).json.updatedAt, iso(realMs))
    // On real time, a `to` before real time is backwards too.
    const past = await advance('sc-basic', { to: iso(realMs - 1) })
    assert.equal(past.status, 409, past.body)
    assert.equal(past.json.now, iso(realMs))

    assert.deepEqual(await audit('sc-basic', 'sandbox_clock.advanced'), [
      { occurredAt: iso(start), details: { from: iso(start), to: iso(start + HOUR), by: 'PT1H' } },
      { occurredAt: iso(start + 5 * MINUTE), details: { from: iso(start + HOUR), to: iso(start + HOUR) } },
      { occurredAt: iso(start + 5 * MINUTE), details: { from: iso(start + HOUR), to: '2026-04-01T00:00:00.000Z' } },
      {
        occurredAt: iso(start + 5 * MINUTE),
        details: { from: '2026-04-01T00:00:00.000Z', to: '2026-04-10T03:04:05.500Z', by: 'P1W2DT3H4M5.5S' },
      },
      { occurredAt: iso(start + 5 * MINUTE), details: { from: '2026-04-10T03:04:05.500Z', to: '2026-04-10T03:04:05.500Z', by: 'PT0S' } },
    ])
    assert.deepEqual(await audit('sc-basic', 'sandbox_clock.reset'), [
      { occurredAt: iso(realMs), details: { from: '2026-04-10T03:04:05.500Z', to: iso(realMs) } },
    ])
  })

  test('bad bodies are 422 at the field; an unknown client is 404; nothing moves', async () => {
    await t.tenant('sc-bad')
    const cases: [unknown, string][] = [
      [{}, ''],
      [{ by: 'PT1H', to: '2026-04-01T00:00:00Z' }, '/to'],
      [{ by: 'P1M' }, '/by'],
      [{ by: 'P1Y' }, '/by'],
      [{ by: 'P' }, '/by'],
      [{ by: 'PT' }, '/by'],
      [{ by: '1 day' }, '/by'],
      [{ by: '-PT1H' }, '/by'],
      [{ by: 'PT-1H' }, '/by'],
      [{ by: 3600 }, '/by'],
      [{ by: 'P9999999D' }, '/by'],
      [{ to: '2026-04-01T00:00:00+01:00' }, '/to'],
      [{ to: '2026-02-30T00:00:00Z' }, '/to'],
      [{ to: 'tomorrow' }, '/to'],
      [{ by: 'PT1H', extra: 1 }, '/extra'],
    ]
    for (const [body, pointer] of cases) {
      const res = await advance('sc-bad', body)
      assert.equal(res.status, 422, `${JSON.stringify(body)}: ${res.body}`)
      assert.equal(code(res), 'validation_error')
      assert.ok(
        // biome-ignore lint/suspicious/noExplicitAny: field errors
        res.json.errors.some((e: any) => e.pointer === pointer),
        `${JSON.stringify(body)} should point at '${pointer}': ${res.body}`,
      )
    }
    assert.deepEqual(ok(await readClock('sc-bad')).json, { clientCode: 'sc-bad', mode: 'real_time', now: iso(realMs), updatedAt: null })
    assert.deepEqual(await audit('sc-bad', 'sandbox_clock.advanced'), [])

    for (const res of [await readClock('nobody'), await advance('nobody', { by: 'PT1H' }), await resetClock('nobody')]) {
      assert.equal(res.status, 404, res.body)
      assert.equal(code(res), 'client_not_found')
    }
    const invalid = await readClock('bad%20code')
    assert.equal(invalid.status, 422, invalid.body)
    // The operator token is required.
    const noToken = await t.call('GET', clockPath('sc-bad'))
    assert.equal(noToken.status, 401, noToken.body)
    assert.equal(code(noToken), 'invalid_admin_token')
  })

  test('durations: weeks, days, hours, minutes and seconds to the millisecond', () => {
    assert.equal(durationMs('PT0S'), 0)
    assert.equal(durationMs('P1W'), 7 * DAY)
    assert.equal(durationMs('P30D'), 30 * DAY)
    assert.equal(durationMs('PT1H30M'), 90 * MINUTE)
    assert.equal(durationMs('P1DT0.001S'), DAY + 1)
    assert.equal(durationMs('P1W2DT3H4M5.5S'), 9 * DAY + 3 * HOUR + 4 * MINUTE + 5500)
    assert.throws(() => durationMs('P1M'), RangeError)
  })

  test("one client's clock does not move another's", async () => {
    const a = await t.tenant('sc-one')
    const b = await t.tenant('sc-other')
    ok(await advance('sc-one', { by: 'P10D' }))
    assert.equal(ok(await putCustomer(a, 'c-a'), 201).json.updatedAt, iso(realMs + 10 * DAY))
    assert.equal(ok(await putCustomer(b, 'c-b'), 201).json.updatedAt, iso(realMs))
    assert.deepEqual(ok(await readClock('sc-other')).json, { clientCode: 'sc-other', mode: 'real_time', now: iso(realMs), updatedAt: null })
    // Operator routes naming the client run at its time too; others at real time.
    assert.equal(ok(await t.admin('PUT', '/admin/v1/clients/sc-other', { name: 'Other' })).json.updatedAt, iso(realMs))
    ok(await resetClock('sc-one'))
  })
})

describe(`sandbox clock: every time rule follows the client's clock (${engineName})`, () => {
  test('freshness: advancing past the threshold gives source_stale at once, with new revisions and feed events', async () => {
    const k = await t.tenant('sc-fresh')
    const other = await t.tenant('sc-fresh-other')
    await payableReceivable(t, k, 'r-1')
    await payableReceivable(t, other, 'r-1')
    const before = ok(await t.call('GET', '/v1/clients/sc-fresh/receivables/r-1', { key: k.apiKey })).json
    assert.deepEqual(before.recovery, { held: false, holds: [] })
    const written = realMs
    const feedBefore = (await feed('sc-fresh')).length

    // Exactly the threshold (2 days, FRESHNESS_STALE_AFTER_TRANSACTION_SECONDS): still fresh, nothing new.
    ok(await advance('sc-fresh', { by: 'P2D' }))
    let freshness = ok(await t.call('GET', '/v1/clients/sc-fresh/source-freshness', { key: k.apiKey })).json
    assert.equal(freshness.state, 'fresh')
    assert.equal((await feed('sc-fresh')).length, feedBefore)

    const staleAt = iso(written + 2 * DAY + 1)
    ok(await advance('sc-fresh', { by: 'PT0.001S' }))
    freshness = ok(await t.call('GET', '/v1/clients/sc-fresh/source-freshness', { key: k.apiKey })).json
    assert.equal(freshness.state, 'stale')
    const stale = ok(await t.call('GET', '/v1/clients/sc-fresh/receivables/r-1', { key: k.apiKey })).json
    assert.equal(stale.revision, before.revision + 1)
    assert.ok(stale.recovery.holds.includes('source_stale'), JSON.stringify(stale.recovery))
    assert.deepEqual((await feed('sc-fresh')).slice(feedBefore), [`receivable.updated r-1 ${stale.revision} ${staleAt}`])

    // The other client, written at the same moment, is fresh: its clock did not move.
    const otherFreshness = ok(await t.call('GET', '/v1/clients/sc-fresh-other/source-freshness', { key: other.apiKey })).json
    assert.equal(otherFreshness.state, 'fresh')
    const otherRead = ok(await t.call('GET', '/v1/clients/sc-fresh-other/receivables/r-1', { key: other.apiKey })).json
    assert.deepEqual(otherRead.recovery, { held: false, holds: [] })
    // The periodic sweep agrees with both (nothing left to flip), at each client's own time.
    assert.equal(await t.app.sweepFreshness(), 0)

    // A Source write at the client's time makes it fresh again.
    ok(await putCustomer(k, 'c-fresh'), 201)
    freshness = ok(await t.call('GET', '/v1/clients/sc-fresh/source-freshness', { key: k.apiKey })).json
    assert.deepEqual([freshness.state, freshness.lastReceivedAt], ['fresh', staleAt])
    ok(await resetClock('sc-fresh'))
  })

  test('payment request expiry: advancing past expiresAt expires open requests at once, with their event', async () => {
    const k = await t.tenant('sc-pay')
    const other = await t.tenant('sc-pay-other')
    for (const tenant of [k, other]) {
      await payableReceivable(t, tenant, 'r-pay')
      const res = await t.call('PUT', `/v1/clients/${tenant.clientCode}/payment-requests/pr-1`, {
        key: tenant.apiKey,
        body: { externalReceivableId: 'r-pay', amount: { amount: '10.00', currency: 'USD' }, expiresAt: iso(realMs + HOUR) },
      })
      ok(res, 201)
    }
    const status = async (client: string) =>
      (
        await t.store.query<{ status: string; revision: string; updated_at: string }>(
          'SELECT status, revision, updated_at FROM payment_requests WHERE client_code = $1',
          [client],
        )
      ).map((r) => `${r.status} ${r.revision} ${r.updated_at}`)

    ok(await advance('sc-pay', { by: 'PT59M59.999S' }))
    assert.deepEqual(await status('sc-pay'), [`open 1 ${iso(realMs)}`])
    const expiresAt = iso(realMs + HOUR)
    ok(await advance('sc-pay', { to: expiresAt }))
    // Expired by the advance itself (no read, no sweep): revision 2 and its event at the client's time.
    assert.deepEqual(await status('sc-pay'), [`expired 2 ${expiresAt}`])
    assert.deepEqual(await feed('sc-pay', ['payment_request.expired']), [`payment_request.expired pr-1 2 ${expiresAt}`])
    const read = ok(await t.call('GET', '/v1/clients/sc-pay/payment-requests/pr-1', { key: k.apiKey })).json
    assert.deepEqual([read.status, read.revision], ['expired', 2])

    // The other client's request is open, and the global sweep (at each client's time) leaves it so.
    assert.equal(await sweepExpiredPaymentRequests(t.store, baseClock, t.app.sandbox ? { sandbox: t.app.sandbox } : {}), 0)
    assert.deepEqual(await status('sc-pay-other'), [`open 1 ${iso(realMs)}`])
    // When real time passes it, the global sweep expires it at real time.
    realMs += HOUR
    assert.equal(await sweepExpiredPaymentRequests(t.store, baseClock, t.app.sandbox ? { sandbox: t.app.sandbox } : {}), 1)
    assert.deepEqual(await status('sc-pay-other'), [`expired 2 ${iso(realMs)}`])
    ok(await resetClock('sc-pay'))
  })

  test("the hosted payment page acts at its client's time", async () => {
    const k = await t.tenant('sc-page')
    await payableReceivable(t, k, 'r-page')
    const created = ok(
      await t.call('PUT', '/v1/clients/sc-page/payment-requests/pr-page', {
        key: k.apiKey,
        body: { externalReceivableId: 'r-page', amount: { amount: '10.00', currency: 'USD' }, expiresAt: iso(realMs + 30 * MINUTE) },
      }),
      201,
    )
    const path = new URL(created.json.hostedUrl).pathname
    ok(await advance('sc-page', { by: 'PT20M' }))
    const page = await t.call('GET', path)
    assert.equal(page.status, 200, page.body)
    const res = await t.call('POST', path, { rawBody: 'outcome=confirmed', contentType: 'application/x-www-form-urlencoded' })
    assert.ok(res.status < 400, `${res.status} ${res.body}`)
    const read = ok(await t.call('GET', '/v1/clients/sc-page/payment-requests/pr-page', { key: k.apiKey })).json
    assert.deepEqual([read.status, read.payment.status, read.payment.decidedAt], ['confirmed', 'confirmed', iso(realMs + 20 * MINUTE)])
    ok(await resetClock('sc-page'))
  })

  test('change-feed retention: events older than 30 days at the client time are purged; old cursors answer 410', async () => {
    const k = await t.tenant('sc-ret')
    const other = await t.tenant('sc-ret-other')
    ok(await putCustomer(k, 'c-old'), 201)
    ok(await putCustomer(k, 'c-old2', 2), 201)
    ok(await putCustomer(other, 'c-old'), 201)
    const first = ok(await t.call('GET', '/v1/clients/sc-ret/changes?limit=1', { key: k.apiKey })).json
    const oldAt = realMs
    ok(await advance('sc-ret', { by: 'P20D' }))
    ok(await putCustomer(k, 'c-new', 2), 201)
    // 30 days after the first write, exactly: kept.
    ok(await advance('sc-ret', { to: iso(oldAt + 30 * DAY) }))
    assert.deepEqual((await feed('sc-ret', ['customer.created'])).length, 3)
    ok(await advance('sc-ret', { by: 'PT0.001S' }))
    assert.deepEqual(await feed('sc-ret', ['customer.created']), [`customer.created c-new 1 ${iso(oldAt + 20 * DAY)}`])
    const expired = await t.call('GET', `/v1/clients/sc-ret/changes?after=${first.nextCursor}`, { key: k.apiKey })
    assert.equal(expired.status, 410, expired.body)
    assert.equal(code(expired), 'cursor_expired')
    // The other client's event is kept, also by the periodic retention (each client at its own time).
    await runRetention(t.store, t.app.sandbox)
    assert.deepEqual(await feed('sc-ret-other', ['customer.created']), [`customer.created c-old 1 ${iso(oldAt)}`])
    assert.deepEqual(await feed('sc-ret', ['customer.created']), [`customer.created c-new 1 ${iso(oldAt + 20 * DAY)}`])
    ok(await resetClock('sc-ret'))
  })

  test('webhook retry schedule: the next attempt is due on the client clock, and advancing reaches it', async () => {
    const k = await t.tenant('sc-hook')
    const other = await t.tenant('sc-hook-other')
    for (const tenant of [k, other]) {
      ok(
        await t.call('PUT', `/v1/clients/${tenant.clientCode}/webhook-endpoint`, {
          key: tenant.apiKey,
          body: { url: `${rx.url}/${tenant.clientCode}` },
        }),
        201,
      )
    }
    ok(await advance('sc-hook', { by: 'P1D' }))
    const frozen = realMs + DAY
    rx.behave(() => ({ status: 500 }))
    ok(await putCustomer(k, 'c-hook'), 201)
    ok(await putCustomer(other, 'c-hook'), 201)
    const run = () => t.app.webhookDispatcher.runOnce()
    const hits = (client: string) => rx.received.filter((r) => r.path === `/hooks/${client}`).length
    const pending = async (client: string) =>
      (
        await t.store.query<{ next_attempt_at: string | null; status: string }>(
          'SELECT next_attempt_at, status FROM webhook_deliveries WHERE client_code = $1',
          [client],
        )
      ).map((r) => `${r.status} ${r.next_attempt_at}`)

    await run()
    assert.deepEqual([hits('sc-hook'), hits('sc-hook-other')], [1, 1])
    // First retry one minute later: on the client's clock for sc-hook, on real time for the other.
    assert.deepEqual(await pending('sc-hook'), [`pending ${iso(frozen + MINUTE)}`])
    assert.deepEqual(await pending('sc-hook-other'), [`pending ${iso(realMs + MINUTE)}`])
    // The signature timestamp is real time whatever the client's clock (receivers check it against theirs).
    const sig = rx.received.find((r) => r.path === '/hooks/sc-hook')?.headers['service-signature']
    assert.match(String(sig), new RegExp(`^t=${Math.floor(realMs / 1000)},`))

    // Real time passes a minute: the other client's retry is due, sc-hook's is not (its clock stands).
    realMs += MINUTE
    await run()
    assert.deepEqual([hits('sc-hook'), hits('sc-hook-other')], [1, 2])
    // Advancing sc-hook's clock by a minute makes its retry due.
    ok(await advance('sc-hook', { by: 'PT59.999S' }))
    await run()
    assert.equal(hits('sc-hook'), 1)
    ok(await advance('sc-hook', { by: 'PT0.001S' }))
    await run()
    assert.equal(hits('sc-hook'), 2)
    assert.deepEqual(await pending('sc-hook'), [`pending ${iso(frozen + MINUTE + 5 * MINUTE)}`])
    rx.behave(() => ({ status: 204 }))
    ok(await advance('sc-hook', { by: 'PT5M' }))
    await run()
    assert.equal(hits('sc-hook'), 3)
    assert.deepEqual(await pending('sc-hook'), ['delivered null'])
    ok(await resetClock('sc-hook'))
  })
})

describe(`sandbox client reset (${engineName})`, () => {
  test('deletes every resource, feed event and batch; keeps the client, grants, keys and endpoint; audited; works again', async () => {
    const k = await t.tenant('sc-reset')
    const other = await t.tenant('sc-reset-other')
    ok(await t.call('PUT', '/v1/clients/sc-reset/webhook-endpoint', { key: k.apiKey, body: { url: `${rx.url}/sc-reset` } }), 201)
    for (const tenant of [k, other]) {
      await payableReceivable(t, tenant, 'r-reset')
      ok(
        await t.call('PUT', `/v1/clients/${tenant.clientCode}/payment-requests/pr-reset`, {
          key: tenant.apiKey,
          body: { externalReceivableId: 'r-reset', amount: { amount: '10.00', currency: 'USD' } },
        }),
        201,
      )
      ok(await t.admin('POST', `/admin/v1/clients/${tenant.clientCode}/payment-requests/pr-reset/simulate`, { outcome: 'confirmed' }), 201)
      const batch = await t.call('PUT', `/v1/clients/${tenant.clientCode}/batches/b-reset`, {
        key: tenant.apiKey,
        body: { records: [{ recordId: 'r1', kind: 'customer', externalId: 'c-batch', body: customer(9) }] },
      })
      assert.ok(batch.status === 202 || batch.status === 201, batch.body)
    }
    await t.app.webhookDispatcher.runOnce()
    ok(await advance('sc-reset', { by: 'PT1H' }))
    const cursor = ok(await t.call('GET', '/v1/clients/sc-reset/changes?limit=1', { key: k.apiKey })).json.nextCursor
    const headBefore = (await t.store.query<{ last_seq: string }>(`SELECT last_seq FROM feed_heads WHERE client_code = 'sc-reset'`))[0]
      ?.last_seq

    // Every table with a client_code column (not its partitions, on the partitioned layout), and how many rows of each client it holds.
    const tables = (
      await t.store.query<{ table_name: string }>(
        `SELECT c.relname AS table_name FROM pg_class c
          WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind IN ('r', 'p') AND NOT c.relispartition
            AND EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'client_code' AND NOT a.attisdropped)`,
      )
    ).map((r) => r.table_name)
    const counts = async (client: string) => {
      const out: Record<string, number> = {}
      for (const table of tables.sort()) {
        const n = Number((await t.store.query<{ n: string }>(`SELECT count(*) AS n FROM ${table} WHERE client_code = $1`, [client]))[0]?.n)
        if (n > 0) out[table] = n
      }
      return out
    }
    const before = await counts('sc-reset')
    const otherBefore = await counts('sc-reset-other')
    for (const table of [
      'customers',
      'receivables',
      'payment_requests',
      'payments',
      'batches',
      'batch_records',
      'change_events',
      'sandbox_clocks',
    ]) {
      assert.ok((before[table] ?? 0) > 0, `the fixture should have ${table}: ${JSON.stringify(before)}`)
    }

    const res = ok(await t.admin('POST', '/admin/v1/clients/sc-reset/sandbox-reset', {}))
    const expectedDeleted = Object.fromEntries(Object.entries(before).filter(([table]) => !RESET_KEEPS.has(table)))
    assert.deepEqual(res.json, { clientCode: 'sc-reset', deleted: expectedDeleted, resetAt: iso(realMs) })
    const kept = Object.fromEntries(Object.entries(before).filter(([table]) => RESET_KEEPS.has(table)))
    // What is kept, as it was, and the reset's own audit event.
    assert.deepEqual(await counts('sc-reset'), { ...kept, audit_events: (kept.audit_events ?? 0) + 1 })
    assert.deepEqual(Object.keys(kept).sort(), ['audit_events', 'clients', 'feed_heads', 'grants', 'webhook_endpoints'])
    // Nothing of the other client was touched.
    assert.deepEqual(await counts('sc-reset-other'), otherBefore)

    assert.deepEqual(await audit('sc-reset', 'client.sandbox_reset'), [{ occurredAt: iso(realMs), details: { deleted: expectedDeleted } }])
    // The clock is back on real time.
    assert.deepEqual(ok(await readClock('sc-reset')).json, { clientCode: 'sc-reset', mode: 'real_time', now: iso(realMs), updatedAt: null })
    // The grant and the key still work; the resources are gone; the feed continues its sequence.
    const gone = await t.call('GET', '/v1/clients/sc-reset/customers/pay-cust', { key: k.apiKey })
    assert.equal(gone.status, 404, gone.body)
    const oldCursor = await t.call('GET', `/v1/clients/sc-reset/changes?after=${cursor}`, { key: k.apiKey })
    assert.equal(oldCursor.status, 410, oldCursor.body)
    assert.equal(ok(await putCustomer(k, 'pay-cust'), 201).json.revision, 1)
    const page = ok(await t.call('GET', '/v1/clients/sc-reset/changes', { key: k.apiKey })).json
    assert.deepEqual(
      // biome-ignore lint/suspicious/noExplicitAny: feed events
      page.data.map((e: any) => `${e.type} ${e.resource.id}`),
      ['customer.created pay-cust'],
    )
    const headAfter = (await t.store.query<{ last_seq: string }>(`SELECT last_seq FROM feed_heads WHERE client_code = 'sc-reset'`))[0]
      ?.last_seq
    assert.equal(BigInt(headAfter as string), BigInt(headBefore as string) + 1n)
    ok(await t.call('GET', '/v1/clients/sc-reset/webhook-endpoint', { key: k.apiKey }))
    await payableReceivable(t, k, 'r-again')

    // An unknown client: 404; the token is required.
    const unknown = await t.admin('POST', '/admin/v1/clients/nobody/sandbox-reset', {})
    assert.deepEqual([unknown.status, code(unknown)], [404, 'client_not_found'])
    const noToken = await t.call('POST', '/admin/v1/clients/sc-reset/sandbox-reset', { body: {} })
    assert.deepEqual([noToken.status, code(noToken)], [401, 'invalid_admin_token'])
    const body = await t.admin('POST', '/admin/v1/clients/sc-reset/sandbox-reset', { confirm: true })
    assert.equal(body.status, 422, body.body)
  })
})

describe(`production refuses the sandbox clock and the client reset (${engineName})`, () => {
  test('every clock and reset route is absent: 404 route_not_found, and not in the operator document', async () => {
    const prod = await startTestApp({ SERVICE_ENVIRONMENT: 'production' }, { clock: baseClock })
    try {
      await prod.tenant('sc-prod')
      const calls: [string, string, unknown][] = [
        ['GET', '/admin/v1/clients/sc-prod/sandbox-clock', undefined],
        ['POST', '/admin/v1/clients/sc-prod/sandbox-clock/advance', { by: 'PT1H' }],
        ['POST', '/admin/v1/clients/sc-prod/sandbox-clock/reset', {}],
        ['POST', '/admin/v1/clients/sc-prod/sandbox-reset', {}],
      ]
      for (const [method, url, body] of calls) {
        const res = await prod.admin(method as 'GET' | 'POST', url, body)
        assert.equal(res.status, 404, `${method} ${url}: ${res.body}`)
        assert.equal(code(res), 'route_not_found')
      }
      assert.equal((await prod.store.query('SELECT 1 FROM sandbox_clocks')).length, 0)
      const doc = ok(await prod.admin('GET', '/admin/v1/openapi.json')).json
      assert.deepEqual(
        Object.keys(doc.paths).filter((p) => p.includes('sandbox')),
        [],
      )
      assert.equal(prod.app.sandbox, undefined)
      const sandboxDoc = ok(await t.admin('GET', '/admin/v1/openapi.json')).json
      assert.deepEqual(
        Object.keys(sandboxDoc.paths)
          .filter((p) => p.includes('sandbox'))
          .sort(),
        [
          '/admin/v1/clients/{clientCode}/sandbox-clock',
          '/admin/v1/clients/{clientCode}/sandbox-clock/advance',
          '/admin/v1/clients/{clientCode}/sandbox-clock/reset',
          '/admin/v1/clients/{clientCode}/sandbox-reset',
        ],
      )
    } finally {
      await prod.close()
    }
  })
})
