import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import fc from 'fast-check'
import { problemCode, startTestApp, type Tenant, type TestApp } from '../../helpers/app.ts'

/**
 * Model-based test of the recovery state table and holds (issue 5): random command sequences run against
 * the service and a small reference model of the spec; every response and every read must agree.
 */
type State = 'none' | 'authorized' | 'withdrawn' | 'suspended'
type Status = 'active' | 'paused' | 'closed'

interface Model {
  state: State
  revision: number
  status: Status
  receivableRestriction: 'none' | 'dispute' | 'hardship'
  customerRestriction: 'none' | 'dispute' | 'legal_hold'
  collectionEnabled: boolean
  sourceRevision: number
}

interface Real {
  t: TestApp
  tenant: Tenant
  rid: string
  cid: string
  iid: string
}

const client = 'model'
let t: TestApp
let tenant: Tenant
let counter = 0

before(async () => {
  t = await startTestApp()
  tenant = await t.tenant(client)
})
after(() => t.close())

const base = `/v1/clients/${client}`
const customerBody = (restriction: Model['customerRestriction']) => ({
  type: 'person',
  name: { firstName: 'Ada', lastName: 'Model' },
  sourceReference: 'ref/model',
  ...(restriction === 'none' ? {} : { restrictions: [{ type: restriction }] }),
})
const receivableBody = (cid: string, m: Model) => ({
  financialType: 'loan_balance',
  sourceRevision: m.sourceRevision,
  recoverableAmount: { amount: '10.00', currency: 'USD' },
  creditUnion: { loanAccountReference: 'l/1', loanType: 'auto' },
  dueDate: '2026-01-01',
  responsibleCustomers: [{ externalCustomerId: cid, role: 'primary' }],
  sourceReference: 'r/model',
  ...(m.receivableRestriction === 'none' ? {} : { restrictions: [{ type: m.receivableRestriction }] }),
})

function restricted(m: Model) {
  return m.receivableRestriction !== 'none' || m.customerRestriction !== 'none'
}

/** The spec's holds for the model (freshness is fresh: every command is a Source write or follows one). */
function expectedHolds(m: Model): string[] {
  const holds: string[] = []
  if (m.state !== 'authorized') holds.push('recovery_not_authorized')
  if (!m.collectionEnabled) holds.push('collection_not_enabled')
  if (m.receivableRestriction === 'hardship' || m.customerRestriction === 'legal_hold') holds.push('source_restriction')
  if (m.receivableRestriction === 'dispute' || m.customerRestriction === 'dispute') holds.push('dispute')
  if (m.status !== 'active') holds.push('other_protection')
  return holds
}

/** After a restriction appears, an authorized instruction is suspended by the service (revision + 1). */
function applySuspension(m: Model) {
  if (m.state === 'authorized' && restricted(m)) {
    m.state = 'suspended'
    m.revision += 1
  }
}

async function check(m: Model, r: Real) {
  const rec = await r.t.call('GET', `${base}/receivables/${r.rid}`, { key: r.tenant.apiKey })
  assert.equal(rec.status, 200)
  assert.deepEqual(rec.json.recovery.holds, expectedHolds(m))
  assert.equal(rec.json.recovery.held, expectedHolds(m).length > 0)
  assert.equal(rec.json.status, m.status)
  const ins = await r.t.call('GET', `${base}/recovery-instructions/${r.iid}`, { key: r.tenant.apiKey })
  if (m.state === 'none') {
    assert.equal(ins.status, 404)
  } else {
    assert.equal(ins.status, 200)
    assert.equal(ins.json.state, m.state)
    assert.equal(ins.json.revision, m.revision)
    assert.deepEqual(ins.json.holds, expectedHolds(m))
  }
}

class Instruct implements fc.AsyncCommand<Model, Real> {
  constructor(
    readonly target: 'authorized' | 'withdrawn',
    readonly offset: number,
  ) {}
  check = () => true
  async run(m: Model, r: Real) {
    const revision = m.revision + 1 + this.offset
    const res = await r.t.call('PUT', `${base}/recovery-instructions/${r.iid}`, {
      key: r.tenant.apiKey,
      body: {
        scope: { type: 'receivable', externalReceivableId: r.rid },
        state: this.target,
        revision,
        effectiveAt: '2026-01-01T00:00:00Z',
      },
    })
    const allowed: Record<State, string[]> = {
      none: ['authorized', 'withdrawn'],
      authorized: ['withdrawn'],
      withdrawn: ['authorized'],
      suspended: ['authorized'],
    }
    if (revision < 1) {
      assert.equal(res.status, 422)
    } else if (revision === m.revision && this.target === m.state) {
      // Same revision and content: an identical retry changes nothing.
      assert.equal(res.status, 200, res.body)
    } else if (this.offset !== 0) {
      assert.equal(res.status, 409, res.body)
      assert.equal(problemCode(res), 'instruction_revision_conflict')
      assert.equal(res.json.expectedRevision, m.revision + 1)
    } else if (!allowed[m.state].includes(this.target)) {
      assert.equal(res.status, 409, res.body)
      assert.equal(problemCode(res), 'instruction_state_conflict')
    } else if (this.target === 'authorized' && restricted(m)) {
      assert.equal(res.status, 409, res.body)
      assert.equal(problemCode(res), 'source_restriction_active')
    } else {
      assert.equal(res.status, m.state === 'none' ? 201 : 200, res.body)
      m.state = this.target
      m.revision = revision
    }
    await check(m, r)
  }
  toString = () => `instruct(${this.target}, ${this.offset})`
}

class RestrictReceivable implements fc.AsyncCommand<Model, Real> {
  constructor(readonly restriction: Model['receivableRestriction']) {}
  check = () => true
  async run(m: Model, r: Real) {
    m.sourceRevision += 1
    m.receivableRestriction = this.restriction
    const res = await r.t.call('PUT', `${base}/receivables/${r.rid}`, { key: r.tenant.apiKey, body: receivableBody(r.cid, m) })
    assert.equal(res.status, 200, res.body)
    applySuspension(m)
    await check(m, r)
  }
  toString = () => `restrictReceivable(${this.restriction})`
}

class RestrictCustomer implements fc.AsyncCommand<Model, Real> {
  constructor(readonly restriction: Model['customerRestriction']) {}
  check = () => true
  async run(m: Model, r: Real) {
    m.customerRestriction = this.restriction
    const res = await r.t.call('PUT', `${base}/customers/${r.cid}`, { key: r.tenant.apiKey, body: customerBody(this.restriction) })
    assert.equal(res.status, 200, res.body)
    applySuspension(m)
    await check(m, r)
  }
  toString = () => `restrictCustomer(${this.restriction})`
}

class Lifecycle implements fc.AsyncCommand<Model, Real> {
  constructor(readonly command: 'pause' | 'resume' | 'close' | 'reopen') {}
  check = () => true
  async run(m: Model, r: Real) {
    const body = {
      effectiveAt: '2026-01-02T00:00:00Z',
      ...(this.command === 'pause' ? { reason: 'source_request' } : {}),
      ...(this.command === 'close' ? { reason: 'settled' } : {}),
    }
    const res = await r.t.call('POST', `${base}/receivables/${r.rid}/${this.command}`, { key: r.tenant.apiKey, body })
    const table = {
      pause: [['active'], 'paused'],
      resume: [['paused'], 'active'],
      close: [['active', 'paused'], 'closed'],
      reopen: [['closed'], 'active'],
    } as const
    const [from, to] = table[this.command]
    if ((from as readonly string[]).includes(m.status)) {
      assert.equal(res.status, 200, res.body)
      m.status = to
      // Reopen never resumes recovery: an authorized instruction is suspended by the service.
      if (this.command === 'reopen' && m.state === 'authorized') {
        m.state = 'suspended'
        m.revision += 1
      }
    } else {
      assert.equal(res.status, 409, res.body)
      assert.equal(problemCode(res), 'receivable_state_conflict')
    }
    await check(m, r)
  }
  toString = () => `lifecycle(${this.command})`
}

class ToggleCollection implements fc.AsyncCommand<Model, Real> {
  check = () => true
  async run(m: Model, r: Real) {
    m.collectionEnabled = !m.collectionEnabled
    const res = await r.t.admin('PUT', `/admin/v1/clients/${client}`, { collectionEnabled: m.collectionEnabled })
    assert.equal(res.status, 200, res.body)
    // The toggle is one client fact; the Receivable's revision follows in the background.
    await r.t.app.clientFanout.runUntilIdle()
    await check(m, r)
  }
  toString = () => 'toggleCollection'
}

test('random sequences of instruction, restriction, lifecycle and collection commands agree with the spec model', async () => {
  const commands = [
    fc
      .tuple(fc.constantFrom('authorized' as const, 'withdrawn' as const), fc.constantFrom(0, 0, 0, 1, -1))
      .map(([s, o]) => new Instruct(s, o)),
    fc.constantFrom('none' as const, 'dispute' as const, 'hardship' as const).map((x) => new RestrictReceivable(x)),
    fc.constantFrom('none' as const, 'dispute' as const, 'legal_hold' as const).map((x) => new RestrictCustomer(x)),
    fc.constantFrom('pause' as const, 'resume' as const, 'close' as const, 'reopen' as const).map((x) => new Lifecycle(x)),
    fc.constant(new ToggleCollection()),
  ]
  await fc.assert(
    fc.asyncProperty(fc.commands(commands, { maxCommands: 20 }), async (cmds) => {
      counter += 1
      const cid = `mc-${counter}`
      const rid = `mr-${counter}`
      // Every run starts from collection disabled.
      await t.admin('PUT', `/admin/v1/clients/${client}`, { collectionEnabled: false })
      await t.app.clientFanout.runUntilIdle()
      const m: Model = {
        state: 'none',
        revision: 0,
        status: 'active',
        receivableRestriction: 'none',
        customerRestriction: 'none',
        collectionEnabled: false,
        sourceRevision: 1,
      }
      assert.equal((await t.call('PUT', `${base}/customers/${cid}`, { key: tenant.apiKey, body: customerBody('none') })).status, 201)
      assert.equal((await t.call('PUT', `${base}/receivables/${rid}`, { key: tenant.apiKey, body: receivableBody(cid, m) })).status, 201)
      await fc.asyncModelRun(() => ({ model: m, real: { t, tenant, rid, cid, iid: `mi-${counter}` } }), cmds)
    }),
    { numRuns: 60 },
  )
})
