import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import fc from 'fast-check'
import { problemCode, type Response, startTestApp, type Tenant, type TestApp } from '../../helpers/app.ts'
import { instalmentReceivable as receivable, usd } from '../../helpers/receivables.ts'

/** A clock the test moves by hand, so every `updatedAt` is an exact value. */
let nowMs = Date.parse('2026-03-01T09:00:00.000Z')
const clock = { now: () => new Date(nowMs) }
const tick = (): string => {
  nowMs += 1000
  return new Date(nowMs).toISOString()
}

const CLIENT = 'rcv-life'
const base = `/v1/clients/${CLIENT}`
let t: TestApp
let k: Tenant

const POSITION = {
  sourceAmount: usd('100.00'),
  workingAmount: usd('100.00'),
  confirmedUnreconciledAmount: usd('0.00'),
  receiptAcknowledgedAmount: usd('0.00'),
}
const ACTIVE_HOLDS = { held: true, holds: ['recovery_not_authorized', 'collection_not_enabled'] }
const PROTECTED_HOLDS = { held: true, holds: ['recovery_not_authorized', 'collection_not_enabled', 'other_protection'] }

type Command = 'pause' | 'resume' | 'close' | 'reopen'
type Status = 'active' | 'paused' | 'closed'

/** The reference model: which states each command starts from and where it leads; anything else is refused. */
const MODEL: Record<Command, { from: readonly Status[]; to: Status }> = {
  pause: { from: ['active'], to: 'paused' },
  resume: { from: ['paused'], to: 'active' },
  close: { from: ['active', 'paused'], to: 'closed' },
  reopen: { from: ['closed'], to: 'active' },
}
const step = (status: Status, command: Command): Status | null => (MODEL[command].from.includes(status) ? MODEL[command].to : null)

const EFFECTIVE_AT = '2026-03-01T08:00:00Z'
const bodyFor = (command: Command, reason?: string): Record<string, unknown> => ({
  effectiveAt: EFFECTIVE_AT,
  ...(command === 'pause' ? { reason: reason ?? 'source_request' } : {}),
  ...(command === 'close' ? { reason: reason ?? 'paid_in_full' } : {}),
})

const put = (id: string, body: unknown) => t.call('PUT', `${base}/receivables/${id}`, { key: k.apiKey, body })
const get = (id: string) => t.call('GET', `${base}/receivables/${id}`, { key: k.apiKey })
const post = (id: string, command: string, body?: unknown, opts: { key?: string; contentType?: string; rawBody?: string } = {}) =>
  t.call('POST', `${base}/receivables/${id}/${command}`, {
    key: opts.key ?? k.apiKey,
    ...(body !== undefined ? { body } : {}),
    ...(opts.rawBody !== undefined ? { rawBody: opts.rawBody } : {}),
    ...(opts.contentType ? { contentType: opts.contentType } : {}),
  })
const send = (id: string, command: Command, reason?: string) => post(id, command, bodyFor(command, reason))
const errors = (res: Response) => res.json.errors.map((e: { code: string; pointer: string }) => [e.code, e.pointer])
const events = async (id: string) =>
  (
    await t.store.query<{ type: string; revision: number }>(
      `SELECT type, revision::int AS revision FROM change_events
        WHERE client_code = $1 AND resource_type = 'receivable' AND resource_id = $2 ORDER BY seq`,
      [CLIENT, id],
    )
  ).map((e) => [e.type, Number(e.revision)])

async function createReceivable(id: string): Promise<Response> {
  tick()
  const res = await put(id, receivable())
  assert.equal(res.status, 201, res.body)
  return res
}

/** Every field of the Receivable after a lifecycle command: only status, revision, updatedAt and holds move. */
function expectedAfter(createdBody: Record<string, unknown>, status: Status, revision: number, updatedAt: string) {
  return {
    ...createdBody,
    status,
    revision,
    updatedAt,
    financialPosition: POSITION,
    recovery: status === 'active' ? ACTIVE_HOLDS : PROTECTED_HOLDS,
  }
}

before(async () => {
  t = await startTestApp({}, { clock })
  k = await t.tenant(CLIENT)
  tick()
  const res = await t.call('PUT', `${base}/customers/cust-1`, {
    key: k.apiKey,
    body: { type: 'person', name: { firstName: 'Ada', lastName: 'Lovelace' }, sourceReference: 'ledger/c/1' },
  })
  assert.equal(res.status, 201, res.body)
})
after(() => t.close())

describe('accepted transitions', () => {
  test('pause, resume, close from active, reopen, close from paused, reopen: exact responses and one event each', async () => {
    const id = 'r-walk'
    const first = (await createReceivable(id)).json
    const path: [Command, string | undefined, Status][] = [
      ['pause', 'source_request', 'paused'],
      ['resume', undefined, 'active'],
      ['close', 'paid_in_full', 'closed'],
      ['reopen', undefined, 'active'],
      ['pause', 'hardship_review', 'paused'],
      ['close', 'paid_in_full', 'closed'],
      ['reopen', undefined, 'active'],
    ]
    let revision = 1
    const expectedEvents: [string, number][] = [['receivable.created', 1]]
    for (const [command, reason, status] of path) {
      const at = tick()
      const res = await send(id, command, reason)
      assert.equal(res.status, 200, `${command}: ${res.body}`)
      revision++
      const expected = expectedAfter(first, status, revision, at)
      assert.deepEqual(res.json, expected, command)
      tick()
      assert.deepEqual((await get(id)).json, expected, `GET after ${command}`)
      expectedEvents.push(['receivable.updated', revision])
      assert.deepEqual(await events(id), expectedEvents, `events after ${command}`)
    }
  })

  test('pause adds other_protection; resume removes it', async () => {
    await createReceivable('r-pause')
    const paused = await send('r-pause', 'pause')
    assert.equal(paused.json.status, 'paused')
    assert.equal(paused.json.revision, 2)
    assert.deepEqual(paused.json.recovery, PROTECTED_HOLDS)
    const resumed = await send('r-pause', 'resume')
    assert.equal(resumed.json.status, 'active')
    assert.equal(resumed.json.revision, 3)
    assert.deepEqual(resumed.json.recovery, ACTIVE_HOLDS)
  })

  test('reopen answers the Receivable active with its financial position; recovery is not resumed', async () => {
    await createReceivable('r-reopen')
    assert.equal((await send('r-reopen', 'close', 'written_off')).json.status, 'closed')
    const reopened = await send('r-reopen', 'reopen')
    assert.equal(reopened.status, 200)
    assert.equal(reopened.json.status, 'active')
    assert.equal(reopened.json.revision, 3)
    assert.deepEqual(reopened.json.financialPosition, POSITION)
    assert.ok(reopened.json.recovery.holds.includes('recovery_not_authorized'))
    assert.equal(reopened.json.recovery.held, true)
  })

  test('every documented reason is accepted', async () => {
    await createReceivable('r-reasons')
    for (const reason of ['source_request', 'hardship_review', 'dispute_review', 'other']) {
      assert.equal((await send('r-reasons', 'pause', reason)).status, 200, reason)
      assert.equal((await send('r-reasons', 'resume')).status, 200)
    }
    for (const reason of ['paid_in_full', 'settled', 'written_off', 'transferred', 'source_closed', 'other']) {
      assert.equal((await send('r-reasons', 'close', reason)).status, 200, reason)
      assert.equal((await send('r-reasons', 'reopen')).status, 200)
    }
    assert.equal((await get('r-reasons')).json.revision, 1 + 2 * 4 + 2 * 6)
  })

  test('effectiveAt takes fractional seconds and leap days', async () => {
    await createReceivable('r-effective')
    assert.equal((await post('r-effective', 'pause', { effectiveAt: '2024-02-29T23:59:59.123456Z', reason: 'other' })).status, 200)
    assert.equal((await post('r-effective', 'resume', { effectiveAt: '2026-03-01T00:00:00.5Z' })).status, 200)
  })

  test('a PUT never changes status: a paused Receivable replaced stays paused, a closed one retried stays closed', async () => {
    await createReceivable('r-put-status')
    assert.equal((await send('r-put-status', 'pause')).status, 200)
    const replaced = await put(
      'r-put-status',
      receivable({ sourceRevision: 2, recoverableAmount: usd('90.00'), balanceBreakdown: undefined }),
    )
    assert.equal(replaced.status, 200)
    assert.equal(replaced.json.status, 'paused')
    assert.equal(replaced.json.revision, 3)
    assert.deepEqual(replaced.json.recovery, PROTECTED_HOLDS)
    assert.equal((await send('r-put-status', 'close')).status, 200)
    const retry = await put('r-put-status', receivable({ sourceRevision: 2, recoverableAmount: usd('90'), balanceBreakdown: undefined }))
    assert.equal(retry.status, 200)
    assert.equal(retry.json.status, 'closed')
    assert.equal(retry.json.revision, 4)
  })
})

describe('refused transitions', () => {
  const refusals: [Status, Command][] = [
    ['paused', 'pause'],
    ['closed', 'pause'],
    ['active', 'resume'],
    ['closed', 'resume'],
    ['closed', 'close'],
    ['active', 'reopen'],
    ['paused', 'reopen'],
  ]
  for (const [status, command] of refusals) {
    test(`${command} on a ${status} Receivable is 409 receivable_state_conflict and changes nothing`, async () => {
      const id = `r-refuse-${command}-${status}`
      await createReceivable(id)
      if (status === 'paused') assert.equal((await send(id, 'pause')).status, 200)
      if (status === 'closed') assert.equal((await send(id, 'close')).status, 200)
      const before = (await get(id)).json
      const eventsBefore = await events(id)
      tick()
      const res = await send(id, command)
      assert.equal(res.status, 409, res.body)
      assert.match(String(res.headers['content-type']), /^application\/problem\+json/)
      assert.equal(res.json.type, 'https://docs.irs.test/problems/receivable_state_conflict')
      assert.equal(res.json.status, 409)
      assert.equal(res.json.currentStatus, status)
      assert.deepEqual((await get(id)).json, before)
      assert.deepEqual(await events(id), eventsBefore)
    })
  }
})

describe('refused requests', () => {
  test('an unknown Receivable is 404 receivable_not_found for every command', async () => {
    for (const command of ['pause', 'resume', 'close', 'reopen'] as const) {
      const res = await send('r-nobody', command)
      assert.equal(res.status, 404, `${command}: ${res.body}`)
      assert.equal(res.json.type, 'https://docs.irs.test/problems/receivable_not_found')
    }
  })

  test("another client's Receivable is unknown under this client", async () => {
    await createReceivable('r-mine')
    const other = await t.tenant('rcv-life-other')
    const res = await t.call('POST', '/v1/clients/rcv-life-other/receivables/r-mine/pause', {
      key: other.apiKey,
      body: bodyFor('pause'),
    })
    assert.equal(res.status, 404)
    assert.equal(problemCode(res), 'receivable_not_found')
    assert.equal((await send('r-mine', 'pause')).status, 200)
    const foreignKey = await post('r-mine', 'resume', bodyFor('resume'), { key: other.apiKey })
    assert.equal(foreignKey.status, 403)
    assert.equal(problemCode(foreignKey), 'client_scope_denied')
    assert.equal((await get('r-mine')).json.status, 'paused')
  })

  test('a key without receivables:write is 403 client_scope_denied', async () => {
    await createReceivable('r-scope')
    const reader = await t.tenant(CLIENT, { integrationId: 'int-rcv-life-reader', scopes: ['receivables:read'] })
    for (const command of ['pause', 'close'] as const) {
      const res = await post('r-scope', command, bodyFor(command), { key: reader.apiKey })
      assert.equal(res.status, 403, res.body)
      assert.equal(problemCode(res), 'client_scope_denied')
    }
    assert.equal((await get('r-scope')).json.revision, 1)
  })

  test('invalid bodies are 422 at the exact pointer and change nothing', async () => {
    const id = 'r-bodies'
    await createReceivable(id)
    const cases: [Command, unknown, [string, string][]][] = [
      ['pause', { effectiveAt: '2026-03-01', reason: 'other' }, [['invalid_format', '/effectiveAt']]],
      ['pause', { effectiveAt: '2026-03-01T00:00:00', reason: 'other' }, [['invalid_format', '/effectiveAt']]],
      ['pause', { effectiveAt: '2026-03-01T00:00:00+01:00', reason: 'other' }, [['invalid_format', '/effectiveAt']]],
      ['pause', { effectiveAt: '2026-02-30T00:00:00Z', reason: 'other' }, [['invalid_format', '/effectiveAt']]],
      ['pause', { effectiveAt: '2025-02-29T00:00:00Z', reason: 'other' }, [['invalid_format', '/effectiveAt']]],
      ['pause', { effectiveAt: '2026-03-01T24:00:00Z', reason: 'other' }, [['invalid_format', '/effectiveAt']]],
      ['pause', { effectiveAt: 1772323200000, reason: 'other' }, [['invalid_type', '/effectiveAt']]],
      ['pause', { effectiveAt: EFFECTIVE_AT, reason: 'paid_in_full' }, [['invalid_value', '/reason']]],
      ['pause', { effectiveAt: EFFECTIVE_AT }, [['invalid_value', '/reason']]],
      ['close', { effectiveAt: EFFECTIVE_AT, reason: 'source_request' }, [['invalid_value', '/reason']]],
      ['close', { effectiveAt: EFFECTIVE_AT, reason: 'because' }, [['invalid_value', '/reason']]],
      ['close', { reason: 'settled' }, [['invalid_type', '/effectiveAt']]],
      ['resume', { effectiveAt: EFFECTIVE_AT, reason: 'other' }, [['unrecognized_keys', '/reason']]],
      ['reopen', { effectiveAt: EFFECTIVE_AT, note: 'x' }, [['unrecognized_keys', '/note']]],
      [
        'pause',
        {},
        [
          ['invalid_type', '/effectiveAt'],
          ['invalid_value', '/reason'],
        ],
      ],
      ['resume', {}, [['invalid_type', '/effectiveAt']]],
      ['resume', null, [['invalid_type', '']]],
      ['reopen', [EFFECTIVE_AT], [['invalid_type', '']]],
    ]
    for (const [command, body, expected] of cases) {
      const res = await post(id, command, undefined, { rawBody: JSON.stringify(body) })
      assert.equal(res.status, 422, `${command} ${JSON.stringify(body)}: ${res.body}`)
      assert.equal(problemCode(res), 'validation_error')
      assert.deepEqual(errors(res), expected, `${command} ${JSON.stringify(body)}`)
    }
    assert.equal((await get(id)).json.revision, 1)
    assert.deepEqual(await events(id), [['receivable.created', 1]])
  })

  test('a missing body with no content type is 415; an empty JSON body is 400; a wrong media type is 415', async () => {
    const id = 'r-media'
    await createReceivable(id)
    for (const command of ['pause', 'resume', 'close', 'reopen']) {
      const none = await post(id, command)
      assert.equal(none.status, 415, `${command}: ${none.body}`)
      assert.equal(problemCode(none), 'unsupported_media_type')
    }
    const empty = await post(id, 'pause', undefined, { rawBody: '', contentType: 'application/json' })
    assert.equal(empty.status, 400, empty.body)
    assert.equal(problemCode(empty), 'malformed_json')
    const text = await post(id, 'pause', undefined, { rawBody: JSON.stringify(bodyFor('pause')), contentType: 'text/plain' })
    assert.equal(text.status, 415)
    assert.equal(problemCode(text), 'unsupported_media_type')
    const form = await post(id, 'pause', undefined, { rawBody: 'effectiveAt=x', contentType: 'application/x-www-form-urlencoded' })
    assert.equal(form.status, 415)
    assert.equal((await get(id)).json.revision, 1)
  })

  test('an unknown command is not a route', async () => {
    await createReceivable('r-cmd')
    const res = await post('r-cmd', 'archive', { effectiveAt: EFFECTIVE_AT })
    assert.equal(res.status, 404)
    assert.equal(problemCode(res), 'route_not_found')
  })
})

describe('property', () => {
  test('random lifecycle command sequences agree with the reference model on every status and the final state', async () => {
    let run = 0
    const commandArb = fc.oneof(
      fc.record({
        command: fc.constant('pause' as const),
        reason: fc.constantFrom('source_request', 'hardship_review', 'dispute_review', 'other'),
      }),
      fc.record({ command: fc.constant('resume' as const), reason: fc.constant(undefined) }),
      fc.record({
        command: fc.constant('close' as const),
        reason: fc.constantFrom('paid_in_full', 'settled', 'written_off', 'transferred', 'source_closed', 'other'),
      }),
      fc.record({ command: fc.constant('reopen' as const), reason: fc.constant(undefined) }),
    )
    await fc.assert(
      fc.asyncProperty(fc.array(commandArb, { minLength: 1, maxLength: 12 }), async (commands) => {
        const id = `r-prop-${++run}`
        await createReceivable(id)
        let status: Status = 'active'
        let revision = 1
        for (const { command, reason } of commands) {
          const next = step(status, command)
          const at = tick()
          const res = await send(id, command, reason)
          if (next === null) {
            assert.equal(res.status, 409, `${status} ${command}: ${res.body}`)
            assert.equal(problemCode(res), 'receivable_state_conflict')
            assert.equal(res.json.currentStatus, status)
          } else {
            assert.equal(res.status, 200, `${status} ${command}: ${res.body}`)
            status = next
            revision++
            assert.equal(res.json.status, status)
            assert.equal(res.json.revision, revision)
            assert.equal(res.json.updatedAt, at)
            assert.deepEqual(res.json.recovery, status === 'active' ? ACTIVE_HOLDS : PROTECTED_HOLDS)
          }
        }
        const final = await get(id)
        assert.equal(final.json.status, status)
        assert.equal(final.json.revision, revision)
        assert.deepEqual(final.json.financialPosition, POSITION)
        const expectedEvents: [string, number][] = [['receivable.created', 1]]
        for (let r = 2; r <= revision; r++) expectedEvents.push(['receivable.updated', r])
        assert.deepEqual(await events(id), expectedEvents)
      }),
      { numRuns: 40 },
    )
  })

  test('the model itself is the documented table', () => {
    const statuses: Status[] = ['active', 'paused', 'closed']
    const table = statuses.map((s) => (['pause', 'resume', 'close', 'reopen'] as const).map((c) => step(s, c)))
    assert.deepEqual(table, [
      ['paused', null, 'closed', null],
      [null, 'active', 'closed', null],
      [null, null, null, 'active'],
    ])
  })
})
