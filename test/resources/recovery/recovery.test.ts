import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { problemCode, type Response, startTestApp, type Tenant, type TestApp } from '../../helpers/app.ts'

const usd = (amount: string) => ({ amount, currency: 'USD' })
const customer = (restrictions?: unknown[]) => ({
  type: 'person',
  name: { firstName: 'Ada', lastName: 'L' },
  sourceReference: 'ref/1',
  ...(restrictions ? { restrictions } : {}),
})
const receivable = (sourceRevision = 1, extra: Record<string, unknown> = {}) => ({
  financialType: 'loan_balance',
  sourceRevision,
  recoverableAmount: usd('10.00'),
  creditUnion: { loanAccountReference: 'l/1', loanType: 'auto' },
  dueDate: '2026-01-01',
  responsibleCustomers: [
    { externalCustomerId: 'cust-1', role: 'primary' },
    { externalCustomerId: 'cust-2', role: 'co_borrower' },
  ],
  sourceReference: 'r/1',
  ...extra,
})
const pointers = (res: Response) => res.json.errors.map((e: { code: string; pointer: string }) => [e.code, e.pointer])

let t: TestApp
let k: Tenant
before(async () => {
  t = await startTestApp()
  k = await t.tenant('rec')
  for (const id of ['cust-1', 'cust-2']) await t.call('PUT', `/v1/clients/rec/customers/${id}`, { key: k.apiKey, body: customer() })
})
after(() => t.close())

const c = (m: 'PUT' | 'GET' | 'POST', p: string, body?: unknown, key = k.apiKey) =>
  t.call(m, `/v1/clients/rec${p}`, { key, ...(body ? { body } : {}) })
const instruct = (id: string, receivableId: string, state: string, revision: number, key?: string) =>
  c(
    'PUT',
    `/recovery-instructions/${id}`,
    { scope: { type: 'receivable', externalReceivableId: receivableId }, state, revision, effectiveAt: '2026-01-01T00:00:00Z' },
    key,
  )

describe('recovery instruction state table', () => {
  test('none→authorized (201), authorized→withdrawn, withdrawn→authorized, identical retry, refused transitions', async () => {
    await c('PUT', '/receivables/r1', receivable())
    const first = await instruct('i1', 'r1', 'authorized', 1)
    assert.equal(first.status, 201)
    assert.deepEqual(Object.keys(first.json).sort(), [
      'effectiveAt',
      'externalInstructionId',
      'holds',
      'recordedAt',
      'recoveryEntryMode',
      'recoveryHeld',
      'revision',
      'scope',
      'state',
    ])
    assert.deepEqual(
      [first.json.state, first.json.revision, first.json.recoveryEntryMode, first.json.recoveryHeld, first.json.holds],
      ['authorized', 1, 'explicit_instruction', true, ['collection_not_enabled']],
    )
    const retry = await instruct('i1', 'r1', 'authorized', 1)
    assert.equal(retry.status, 200)
    assert.equal(retry.json.recordedAt, first.json.recordedAt)
    assert.equal(problemCode(await instruct('i1', 'r1', 'authorized', 2)), 'instruction_state_conflict')
    const wrongRev = await instruct('i1', 'r1', 'withdrawn', 3)
    assert.equal(problemCode(wrongRev), 'instruction_revision_conflict')
    assert.equal(wrongRev.json.expectedRevision, 2)
    assert.match(wrongRev.json.detail, /Expected revision 2/)
    assert.equal((await instruct('i1', 'r1', 'withdrawn', 2)).json.state, 'withdrawn')
    assert.equal(problemCode(await instruct('i1', 'r1', 'withdrawn', 3)), 'instruction_state_conflict')
    assert.equal((await instruct('i1', 'r1', 'authorized', 3)).json.state, 'authorized')
    assert.equal((await c('GET', '/recovery-instructions/i1')).json.revision, 3)
    // none → withdrawn, and a new instruction must start at revision 1.
    await c('PUT', '/receivables/r2', receivable())
    assert.equal(problemCode(await instruct('i2', 'r2', 'withdrawn', 2)), 'instruction_revision_conflict')
    assert.equal((await instruct('i2', 'r2', 'withdrawn', 1)).status, 201)
  })

  test('one instruction per Receivable, scope cannot change, unknown Receivable, bounds, scopes and modes', async () => {
    await c('PUT', '/receivables/r3', receivable())
    assert.equal((await instruct('i3', 'r3', 'withdrawn', 1)).status, 201)
    const second = await instruct('i3b', 'r3', 'authorized', 1)
    assert.equal(problemCode(second), 'instruction_scope_conflict')
    assert.equal(second.json.externalInstructionId, 'i3')
    assert.equal(problemCode(await instruct('i3', 'r1', 'authorized', 2)), 'instruction_scope_conflict')
    assert.deepEqual(pointers(await instruct('i9', 'ghost', 'authorized', 1)), [['unknown_reference', '/scope/externalReceivableId']])
    assert.deepEqual(pointers(await instruct('i9', 'r3', 'authorized', 0)), [['too_small', '/revision']])
    assert.deepEqual(pointers(await instruct('i9', 'r3', 'authorized', 2147483648)), [['too_big', '/revision']])
    assert.deepEqual(pointers(await instruct('i9', 'r3', 'suspended', 1)), [['invalid_value', '/state']])
    const rw = await t.tenant('rec', { integrationId: 'int-rw', scopes: ['receivables:write', 'receivables:read'] })
    assert.equal(problemCode(await instruct('i9', 'r3', 'authorized', 1, rw.apiKey)), 'client_scope_denied')
    const rules = await t.tenant('rec', { integrationId: 'int-rules', grant: { recoveryEntryMode: 'approved_rules' } })
    const mismatch = await instruct('i9', 'r3', 'authorized', 1, rules.apiKey)
    assert.equal(mismatch.status, 409)
    assert.equal(problemCode(mismatch), 'recovery_mode_mismatch')
    assert.equal(problemCode(await c('GET', '/recovery-instructions/none')), 'recovery_instruction_not_found')
  })
})

describe('reopen never resumes recovery', () => {
  test('an authorized instruction is suspended when its closed Receivable is reopened; a new revision resumes', async () => {
    await c('PUT', '/receivables/r-reopen', receivable())
    assert.equal((await instruct('i-reopen', 'r-reopen', 'authorized', 1)).status, 201)
    assert.equal((await c('POST', '/receivables/r-reopen/close', { effectiveAt: '2026-02-01T00:00:00Z', reason: 'settled' })).status, 200)
    const reopened = await c('POST', '/receivables/r-reopen/reopen', { effectiveAt: '2026-02-02T00:00:00Z' })
    assert.equal(reopened.json.status, 'active')
    assert.ok(reopened.json.recovery.holds.includes('recovery_not_authorized'))
    const ins = (await c('GET', '/recovery-instructions/i-reopen')).json
    assert.deepEqual([ins.state, ins.revision], ['suspended', 2])
    assert.equal((await instruct('i-reopen', 'r-reopen', 'authorized', 3)).json.state, 'authorized')
  })
})

describe('restrictions and disputes', () => {
  test('a Dispute on a co-borrower suspends; clearing it alone never resumes; only a new revision does', async () => {
    await c('PUT', '/receivables/r4', receivable())
    assert.equal((await instruct('i4', 'r4', 'authorized', 1)).status, 201)
    assert.equal((await c('PUT', '/customers/cust-2', customer([{ type: 'dispute', reference: 'case/9' }]))).status, 200)
    const suspended = (await c('GET', '/recovery-instructions/i4')).json
    assert.deepEqual([suspended.state, suspended.revision], ['suspended', 2])
    assert.ok(suspended.holds.includes('dispute') && suspended.holds.includes('recovery_not_authorized'))
    assert.equal(problemCode(await instruct('i4', 'r4', 'authorized', 3)), 'source_restriction_active')
    assert.equal((await c('PUT', '/customers/cust-2', customer())).status, 200)
    const cleared = (await c('GET', '/recovery-instructions/i4')).json
    assert.deepEqual([cleared.state, cleared.revision, cleared.holds.includes('recovery_not_authorized')], ['suspended', 2, true])
    assert.equal(problemCode(await instruct('i4', 'r4', 'withdrawn', 3)), 'instruction_state_conflict')
    assert.equal((await instruct('i4', 'r4', 'authorized', 3)).json.state, 'authorized')
  })

  test('a restriction on the Receivable itself suspends and holds source_restriction; validation', async () => {
    await c('PUT', '/receivables/r5', receivable())
    await instruct('i5', 'r5', 'authorized', 1)
    assert.equal((await c('PUT', '/receivables/r5', receivable(2, { restrictions: [{ type: 'bankruptcy' }] }))).status, 200)
    const s = (await c('GET', '/recovery-instructions/i5')).json
    assert.deepEqual([s.state, s.holds.includes('source_restriction')], ['suspended', true])
    assert.deepEqual(
      pointers(await c('PUT', '/receivables/r5', receivable(3, { restrictions: Array.from({ length: 9 }, () => ({ type: 'other' })) }))),
      [['too_big', '/restrictions']],
    )
    assert.deepEqual(pointers(await c('PUT', '/receivables/r5', receivable(3, { restrictions: [{ type: 'other' }, { type: 'other' }] }))), [
      ['custom', '/restrictions/1/type'],
    ])
    assert.deepEqual(pointers(await c('PUT', '/receivables/r5', receivable(3, { restrictions: [{ type: 'divorce' }] }))), [
      ['invalid_value', '/restrictions/0/type'],
    ])
    assert.deepEqual(
      pointers(await c('PUT', '/receivables/r5', receivable(3, { restrictions: [{ type: 'other', reference: 'a@b.co' }] }))),
      [['sensitive_source_reference', '/restrictions/0/reference']],
    )
    assert.equal(problemCode(await instruct('i6', 'r5', 'authorized', 1)), 'instruction_scope_conflict')
  })
})

describe('holds: one definition, and every change of holds is a change of the Receivable', () => {
  test('each hold change raises the revision by exactly one and writes one event with it', async () => {
    const x = await t.tenant('holds')
    const h = (m: 'PUT' | 'GET' | 'POST', p: string, body?: unknown) =>
      t.call(m, `/v1/clients/holds${p}`, { key: x.apiKey, ...(body ? { body } : {}) })
    for (const id of ['cust-1', 'cust-2']) await h('PUT', `/customers/${id}`, customer())
    await h('PUT', '/receivables/r', receivable())
    const steps: [string, () => Promise<unknown>, string[]][] = [
      [
        'authorize',
        () =>
          h('PUT', '/recovery-instructions/i', {
            scope: { type: 'receivable', externalReceivableId: 'r' },
            state: 'authorized',
            revision: 1,
            effectiveAt: '2026-01-01T00:00:00Z',
          }),
        ['collection_not_enabled'],
      ],
      ['enable collection', () => t.admin('PUT', '/admin/v1/clients/holds', { collectionEnabled: true }), []],
      ['pause', () => h('POST', '/receivables/r/pause', { effectiveAt: '2026-01-02T00:00:00Z', reason: 'other' }), ['other_protection']],
      ['resume', () => h('POST', '/receivables/r/resume', { effectiveAt: '2026-01-03T00:00:00Z' }), []],
      [
        'hardship on the primary',
        () => h('PUT', '/customers/cust-1', customer([{ type: 'hardship' }])),
        ['recovery_not_authorized', 'source_restriction'],
      ],
      ['cleared', () => h('PUT', '/customers/cust-1', customer()), ['recovery_not_authorized']],
    ]
    let revision = 1
    for (const [what, step, holds] of steps) {
      await step()
      // A client-wide change (the collection toggle) reaches the Receivable in the background.
      await t.app.clientFanout.runUntilIdle()
      revision++
      const r = (await h('GET', '/receivables/r')).json
      assert.equal(r.revision, revision, what)
      assert.deepEqual(r.recovery.holds, holds, what)
      const ins = (await h('GET', '/recovery-instructions/i')).json
      assert.deepEqual(ins.holds, holds, what)
      assert.equal(ins.recoveryHeld, holds.length > 0)
      const summary = (await h('GET', '/collection-summary')).json
      for (const hold of [
        'recovery_not_authorized',
        'collection_not_enabled',
        'source_restriction',
        'dispute',
        'source_stale',
        'other_protection',
        'reconciliation_hold',
      ]) {
        assert.equal(summary.recovery.holds[hold], holds.includes(hold) ? 1 : 0, `${what}: ${hold}`)
      }
    }
    const feed = await t.store.query<{ revision: string }>(
      `SELECT revision::text FROM change_events WHERE client_code = 'holds' AND resource_id = 'r' ORDER BY seq`,
    )
    assert.deepEqual(
      feed.map((e) => Number(e.revision)),
      Array.from({ length: revision }, (_, i) => i + 1),
    )
  })
})
