import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { problemCode, type Response, startTestApp, type Tenant, type TestApp } from '../../helpers/app.ts'

const CLIENT = 'rcv-errors'
const base = `/v1/clients/${CLIENT}`
let t: TestApp
let k: Tenant

const usd = (amount: string) => ({ amount, currency: 'USD' })
const eur = (amount: string) => ({ amount, currency: 'EUR' })
const CONTEXT = {
  loanAccountReference: 'loans/LN-77',
  loanType: 'auto',
  arrearsAmount: usd('50.00'),
  contractualInstalment: { amount: usd('25.00'), frequency: 'monthly' },
  defaultDate: '2026-01-31',
  totalOutstandingAmount: usd('900.00'),
}
const BREAKDOWN = { costs: usd('0.00'), fees: usd('5.00'), interest: usd('10.50'), principal: usd('84.50') }

/** The brief's valid Receivable; `undefined` overrides drop a field. */
const receivable = (overrides: Record<string, unknown> = {}) => ({
  financialType: 'loan_instalment',
  sourceRevision: 1,
  recoverableAmount: usd('100.00'),
  balanceBreakdown: BREAKDOWN,
  creditUnion: CONTEXT,
  dueDate: '2026-02-28',
  responsibleCustomers: [{ externalCustomerId: 'cust-1', role: 'primary' }],
  sourceReference: 'ledger/r/1',
  ...overrides,
})
const customers = (n: number, primaries = 1) =>
  Array.from({ length: n }, (_, i) => ({ externalCustomerId: `cust-${i + 1}`, role: i < primaries ? 'primary' : 'guarantor' }))

let seq = 0
const put = (id: string, body: unknown) => t.call('PUT', `${base}/receivables/${id}`, { key: k.apiKey, body })
const errors = (res: Response) => (res.json?.errors ?? []).map((e: { code: string; pointer: string }) => [e.code, e.pointer])
const receivableEvents = async () =>
  Number(
    (
      await t.store.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM change_events WHERE client_code = $1 AND resource_type = 'receivable'`,
        [CLIENT],
      )
    )[0]?.n,
  )

/**
 * PUTs the body under a fresh identifier and asserts a 422 problem with exactly these errors, and that
 * nothing was written: the Receivable does not exist afterwards and the change feed did not move.
 */
async function refused(body: unknown, expected: [string, string][], problem = 'validation_error') {
  const id = `r-bad-${++seq}`
  const eventsBefore = await receivableEvents()
  const res = await put(id, body)
  assert.equal(res.status, 422, res.body)
  assert.match(String(res.headers['content-type']), /^application\/problem\+json/)
  assert.equal(res.json.type, `https://docs.irs.test/problems/${problem}`)
  assert.equal(res.json.status, 422)
  assert.deepEqual(errors(res), expected)
  for (const e of res.json.errors) assert.equal(typeof e.detail, 'string')
  assert.equal((await t.call('GET', `${base}/receivables/${id}`, { key: k.apiKey })).status, 404, 'nothing was created')
  assert.equal(await receivableEvents(), eventsBefore, 'no change event')
  return res
}

async function accepted(body: unknown) {
  const res = await put(`r-ok-${++seq}`, body)
  assert.equal(res.status, 201, res.body)
  return res
}

before(async () => {
  t = await startTestApp()
  k = await t.tenant(CLIENT)
  for (let i = 1; i <= 8; i++) {
    const res = await t.call('PUT', `${base}/customers/cust-${i}`, {
      key: k.apiKey,
      body: { type: 'person', name: { firstName: 'Ada', lastName: `L${i}` }, sourceReference: `ledger/c/${i}` },
    })
    assert.equal(res.status, 201, res.body)
  }
})
after(() => t.close())

test('the fixture itself is accepted', async () => {
  await accepted(receivable())
})

describe('financialType and the industry context', () => {
  test('financialType must be one of the enum', async () => {
    for (const financialType of ['mortgage', 'LOAN_INSTALMENT', '', 1, null]) {
      await refused(receivable({ financialType }), [['invalid_value', '/financialType']])
    }
    await refused(receivable({ financialType: undefined }), [['invalid_value', '/financialType']])
    for (const financialType of ['loan_instalment', 'accelerated_balance', 'loan_balance']) await accepted(receivable({ financialType }))
  })

  test('a missing creditUnion is 422 profile_mismatch with errors[0] at /creditUnion', async () => {
    const res = await refused(receivable({ creditUnion: undefined }), [['profile_mismatch', '/creditUnion']], 'profile_mismatch')
    assert.equal(res.json.title, 'Industry profile mismatch')
  })

  test('creditUnion null or not an object is a validation error, not a profile mismatch', async () => {
    await refused(receivable({ creditUnion: null }), [['invalid_type', '/creditUnion']])
    await refused(receivable({ creditUnion: 'auto' }), [['invalid_type', '/creditUnion']])
  })

  test('inside creditUnion: required fields, enums and dates', async () => {
    const { loanAccountReference: _l, ...noReference } = CONTEXT
    await refused(receivable({ creditUnion: noReference }), [['invalid_type', '/creditUnion/loanAccountReference']])
    const { loanType: _t, ...noType } = CONTEXT
    await refused(receivable({ creditUnion: noType }), [['invalid_value', '/creditUnion/loanType']])
    await refused(receivable({ creditUnion: { ...CONTEXT, loanType: 'boat' } }), [['invalid_value', '/creditUnion/loanType']])
    await refused(receivable({ creditUnion: { ...CONTEXT, contractualInstalment: { amount: usd('25.00'), frequency: 'daily' } } }), [
      ['invalid_value', '/creditUnion/contractualInstalment/frequency'],
    ])
    await refused(receivable({ creditUnion: { ...CONTEXT, defaultDate: '2026-04-31' } }), [['invalid_format', '/creditUnion/defaultDate']])
    await refused(receivable({ creditUnion: { ...CONTEXT, loanAccountReference: '' } }), [
      ['too_small', '/creditUnion/loanAccountReference'],
    ])
    await refused(receivable({ creditUnion: { ...CONTEXT, loanAccountReference: 'x'.repeat(201) } }), [
      ['too_big', '/creditUnion/loanAccountReference'],
    ])
    await accepted(receivable({ creditUnion: { ...CONTEXT, loanAccountReference: 'x'.repeat(200) } }))
  })

  test('a fourth assertion, or any other unknown key, in creditUnion is unrecognized_keys at its own pointer', async () => {
    await refused(receivable({ creditUnion: { ...CONTEXT, collateralValue: usd('1.00') } }), [
      ['unrecognized_keys', '/creditUnion/collateralValue'],
    ])
    await refused(receivable({ creditUnion: { ...CONTEXT, arrears: usd('1.00'), memberNumber: 'x' } }), [
      ['unrecognized_keys', '/creditUnion/arrears'],
      ['unrecognized_keys', '/creditUnion/memberNumber'],
    ])
    await refused(
      receivable({
        creditUnion: { ...CONTEXT, contractualInstalment: { amount: usd('25.00'), frequency: 'monthly', startDate: '2026-01-01' } },
      }),
      [['unrecognized_keys', '/creditUnion/contractualInstalment/startDate']],
    )
  })

  test('a sensitive loanAccountReference is sensitive_source_reference at /creditUnion/loanAccountReference', async () => {
    for (const loanAccountReference of [
      '4111111111111111',
      '4111 1111 1111 1111',
      'loan 123456789',
      'ada@example.com',
      'GB82WEST12345698765432',
    ]) {
      await refused(receivable({ creditUnion: { ...CONTEXT, loanAccountReference } }), [
        ['sensitive_source_reference', '/creditUnion/loanAccountReference'],
      ])
    }
    await accepted(receivable({ creditUnion: { ...CONTEXT, loanAccountReference: 'loans/LN-12345678' } }))
  })
})

describe('balanceBreakdown', () => {
  test('all four parts or none: each missing part is reported at its pointer', async () => {
    for (const missing of ['costs', 'fees', 'interest', 'principal']) {
      const partial = { ...BREAKDOWN, [missing]: undefined }
      await refused(receivable({ balanceBreakdown: partial }), [['invalid_type', `/balanceBreakdown/${missing}`]])
    }
    await refused(receivable({ balanceBreakdown: {} }), [
      ['invalid_type', '/balanceBreakdown/costs'],
      ['invalid_type', '/balanceBreakdown/fees'],
      ['invalid_type', '/balanceBreakdown/interest'],
      ['invalid_type', '/balanceBreakdown/principal'],
    ])
    await refused(receivable({ balanceBreakdown: { ...BREAKDOWN, tax: usd('0.00') } }), [['unrecognized_keys', '/balanceBreakdown/tax']])
    await accepted(receivable({ balanceBreakdown: undefined }))
  })

  test('the parts must sum exactly to recoverableAmount: custom at /balanceBreakdown', async () => {
    await refused(receivable({ balanceBreakdown: { ...BREAKDOWN, principal: usd('84.49') } }), [['custom', '/balanceBreakdown']])
    await refused(receivable({ balanceBreakdown: { ...BREAKDOWN, principal: usd('84.51') } }), [['custom', '/balanceBreakdown']])
    await refused(receivable({ recoverableAmount: usd('0.00') }), [['custom', '/balanceBreakdown']])
    // Exact: spellings differ, the sum does not.
    await accepted(
      receivable({
        recoverableAmount: usd('100'),
        balanceBreakdown: { costs: usd('0'), fees: usd('5'), interest: usd('10.5'), principal: usd('84.50') },
      }),
    )
    await accepted(
      receivable({
        recoverableAmount: usd('0.30'),
        balanceBreakdown: { costs: usd('0.10'), fees: usd('0.20'), interest: usd('0'), principal: usd('0') },
        creditUnion: { loanAccountReference: 'l/1', loanType: 'auto' },
      }),
    )
  })
})

describe('currencies', () => {
  test('every Money must share recoverableAmount.currency: custom at the exact pointer', async () => {
    await refused(receivable({ balanceBreakdown: { ...BREAKDOWN, costs: eur('0.00') } }), [['custom', '/balanceBreakdown/costs/currency']])
    await refused(
      receivable({ balanceBreakdown: { costs: eur('0.00'), fees: eur('5.00'), interest: eur('10.50'), principal: eur('84.50') } }),
      [
        ['custom', '/balanceBreakdown/costs/currency'],
        ['custom', '/balanceBreakdown/fees/currency'],
        ['custom', '/balanceBreakdown/interest/currency'],
        ['custom', '/balanceBreakdown/principal/currency'],
      ],
    )
    await refused(receivable({ creditUnion: { ...CONTEXT, arrearsAmount: eur('50.00') } }), [
      ['custom', '/creditUnion/arrearsAmount/currency'],
    ])
    await refused(receivable({ creditUnion: { ...CONTEXT, contractualInstalment: { amount: eur('25.00'), frequency: 'monthly' } } }), [
      ['custom', '/creditUnion/contractualInstalment/amount/currency'],
    ])
    await refused(receivable({ creditUnion: { ...CONTEXT, totalOutstandingAmount: eur('900.00') } }), [
      ['custom', '/creditUnion/totalOutstandingAmount/currency'],
    ])
    // recoverableAmount is the reference: when it alone differs, every other Money is reported.
    await refused(receivable({ recoverableAmount: eur('100.00'), creditUnion: { loanAccountReference: 'l/1', loanType: 'auto' } }), [
      ['custom', '/balanceBreakdown/costs/currency'],
      ['custom', '/balanceBreakdown/fees/currency'],
      ['custom', '/balanceBreakdown/interest/currency'],
      ['custom', '/balanceBreakdown/principal/currency'],
    ])
  })

  test("currency codes: 'usd' invalid_format, JPY, KWD and ABC refused, each at its own pointer only", async () => {
    await refused(receivable({ recoverableAmount: { amount: '100.00', currency: 'usd' } }), [
      ['invalid_format', '/recoverableAmount/currency'],
    ])
    await refused(receivable({ balanceBreakdown: { ...BREAKDOWN, fees: { amount: '5.00', currency: 'usd' } } }), [
      ['invalid_format', '/balanceBreakdown/fees/currency'],
    ])
    for (const code of ['JPY', 'KWD', 'ABC']) {
      await refused(receivable({ recoverableAmount: { amount: '100.00', currency: code } }), [['custom', '/recoverableAmount/currency']])
      await refused(receivable({ creditUnion: { ...CONTEXT, arrearsAmount: { amount: '1.00', currency: code } } }), [
        ['custom', '/creditUnion/arrearsAmount/currency'],
      ])
    }
    const gbp = (amount: string) => ({ amount, currency: 'GBP' })
    await accepted(
      receivable({
        recoverableAmount: gbp('100.00'),
        balanceBreakdown: { costs: gbp('0.00'), fees: gbp('5.00'), interest: gbp('10.50'), principal: gbp('84.50') },
        creditUnion: {
          ...CONTEXT,
          arrearsAmount: gbp('1'),
          contractualInstalment: { amount: gbp('2'), frequency: 'weekly' },
          totalOutstandingAmount: gbp('3'),
        },
      }),
    )
  })
})

describe('amounts', () => {
  test('three decimals or a negative amount is invalid_format at the amount, with or without a breakdown', async () => {
    for (const amount of ['100.001', '-100.00', '-1', '1e2', '100.', '0100.00', '1,000.00', '1000000000000000.00']) {
      await refused(receivable({ recoverableAmount: usd(amount), balanceBreakdown: undefined }), [
        ['invalid_format', '/recoverableAmount/amount'],
      ])
      await refused(receivable({ recoverableAmount: usd(amount) }), [['invalid_format', '/recoverableAmount/amount']])
    }
    await refused(receivable({ balanceBreakdown: { ...BREAKDOWN, fees: usd('5.001') } }), [
      ['invalid_format', '/balanceBreakdown/fees/amount'],
    ])
    await refused(receivable({ balanceBreakdown: { ...BREAKDOWN, costs: usd('-0.00') } }), [
      ['invalid_format', '/balanceBreakdown/costs/amount'],
    ])
    await refused(receivable({ creditUnion: { ...CONTEXT, arrearsAmount: usd('-1') } }), [
      ['invalid_format', '/creditUnion/arrearsAmount/amount'],
    ])
    await refused(receivable({ creditUnion: { ...CONTEXT, contractualInstalment: { amount: usd('2.555'), frequency: 'monthly' } } }), [
      ['invalid_format', '/creditUnion/contractualInstalment/amount/amount'],
    ])
  })

  test('an amount must be a string', async () => {
    await refused(receivable({ recoverableAmount: { amount: 100, currency: 'USD' } }), [['invalid_type', '/recoverableAmount/amount']])
    await refused(receivable({ recoverableAmount: { amount: '100.00' } }), [['invalid_type', '/recoverableAmount/currency']])
    await refused(receivable({ recoverableAmount: null }), [['invalid_type', '/recoverableAmount']])
    await refused(receivable({ recoverableAmount: { ...usd('100.00'), scale: 2 } }), [['unrecognized_keys', '/recoverableAmount/scale']])
  })

  test('the largest amount the wire format allows is accepted', async () => {
    const res = await accepted(receivable({ recoverableAmount: usd('999999999999999.99'), balanceBreakdown: undefined }))
    assert.deepEqual(res.json.financialPosition.sourceAmount, usd('999999999999999.99'))
  })
})

describe('responsibleCustomers', () => {
  test('1 to 8 entries: 0 is too_small, 9 is too_big, at /responsibleCustomers', async () => {
    await refused(receivable({ responsibleCustomers: [] }), [['too_small', '/responsibleCustomers']])
    await refused(
      receivable({
        responsibleCustomers: [...customers(8), { externalCustomerId: 'cust-9', role: 'guarantor' }],
      }),
      [['too_big', '/responsibleCustomers']],
    )
    const eight = await accepted(receivable({ responsibleCustomers: customers(8) }))
    assert.deepEqual(eight.json.responsibleCustomers, customers(8))
    await refused(receivable({ responsibleCustomers: undefined }), [['invalid_type', '/responsibleCustomers']])
  })

  test('a Customer listed twice is custom at /responsibleCustomers/<later index>/externalCustomerId', async () => {
    await refused(
      receivable({
        responsibleCustomers: [
          { externalCustomerId: 'cust-1', role: 'primary' },
          { externalCustomerId: 'cust-1', role: 'guarantor' },
        ],
      }),
      [['custom', '/responsibleCustomers/1/externalCustomerId']],
    )
    await refused(
      receivable({
        responsibleCustomers: [
          { externalCustomerId: 'cust-1', role: 'primary' },
          { externalCustomerId: 'cust-2', role: 'guarantor' },
          { externalCustomerId: 'cust-2', role: 'co_borrower' },
        ],
      }),
      [['custom', '/responsibleCustomers/2/externalCustomerId']],
    )
  })

  test('exactly one primary: none or two is custom at /responsibleCustomers', async () => {
    await refused(receivable({ responsibleCustomers: [{ externalCustomerId: 'cust-1', role: 'guarantor' }] }), [
      ['custom', '/responsibleCustomers'],
    ])
    await refused(receivable({ responsibleCustomers: customers(2, 2) }), [['custom', '/responsibleCustomers']])
    await refused(receivable({ responsibleCustomers: customers(3, 0) }), [['custom', '/responsibleCustomers']])
    await refused(receivable({ responsibleCustomers: [{ externalCustomerId: 'cust-1', role: 'owner' }] }), [
      ['invalid_value', '/responsibleCustomers/0/role'],
    ])
  })

  test('an unknown Customer is 422 unknown_reference at each unknown entry', async () => {
    await refused(receivable({ responsibleCustomers: [{ externalCustomerId: 'ghost', role: 'primary' }] }), [
      ['unknown_reference', '/responsibleCustomers/0/externalCustomerId'],
    ])
    await refused(
      receivable({
        responsibleCustomers: [
          { externalCustomerId: 'cust-1', role: 'primary' },
          { externalCustomerId: 'ghost-a', role: 'guarantor' },
          { externalCustomerId: 'cust-2', role: 'guarantor' },
          { externalCustomerId: 'ghost-b', role: 'co_borrower' },
        ],
      }),
      [
        ['unknown_reference', '/responsibleCustomers/1/externalCustomerId'],
        ['unknown_reference', '/responsibleCustomers/3/externalCustomerId'],
      ],
    )
    // Identifiers are case-sensitive.
    await refused(receivable({ responsibleCustomers: [{ externalCustomerId: 'CUST-1', role: 'primary' }] }), [
      ['unknown_reference', '/responsibleCustomers/0/externalCustomerId'],
    ])
  })

  test('an unknown Customer on replace is refused and the Receivable keeps its previous version', async () => {
    const created = await put('r-replace-ghost', receivable())
    assert.equal(created.status, 201)
    const res = await put(
      'r-replace-ghost',
      receivable({ sourceRevision: 2, responsibleCustomers: [{ externalCustomerId: 'ghost', role: 'primary' }] }),
    )
    assert.equal(res.status, 422, res.body)
    assert.deepEqual(errors(res), [['unknown_reference', '/responsibleCustomers/0/externalCustomerId']])
    assert.deepEqual((await t.call('GET', `${base}/receivables/r-replace-ghost`, { key: k.apiKey })).json, created.json)
  })

  test('a Customer of another client is unknown here', async () => {
    const other = await t.tenant('rcv-errors-other')
    await t.call('PUT', '/v1/clients/rcv-errors-other/customers/only-there', {
      key: other.apiKey,
      body: { type: 'person', name: { firstName: 'A', lastName: 'B' }, sourceReference: 'x/1' },
    })
    await refused(receivable({ responsibleCustomers: [{ externalCustomerId: 'only-there', role: 'primary' }] }), [
      ['unknown_reference', '/responsibleCustomers/0/externalCustomerId'],
    ])
  })

  test('customer identifiers are ExternalIds: pattern and sensitivity', async () => {
    await refused(receivable({ responsibleCustomers: [{ externalCustomerId: 'cust 1', role: 'primary' }] }), [
      ['invalid_format', '/responsibleCustomers/0/externalCustomerId'],
    ])
    await refused(receivable({ responsibleCustomers: [{ externalCustomerId: '4111111111111111', role: 'primary' }] }), [
      ['sensitive_external_id', '/responsibleCustomers/0/externalCustomerId'],
    ])
    await refused(receivable({ responsibleCustomers: [{ externalCustomerId: 'cust-1', role: 'primary', share: 1 }] }), [
      ['unrecognized_keys', '/responsibleCustomers/0/share'],
    ])
  })
})

describe('sourceRevision, dates, references and unknown keys', () => {
  test('sourceRevision is a safe integer: above 2^53-1 too_big, negative too_small, fractional or a string invalid_type', async () => {
    await refused(receivable({ sourceRevision: 9007199254740992 }), [['too_big', '/sourceRevision']])
    await refused(receivable({ sourceRevision: -1 }), [['too_small', '/sourceRevision']])
    await refused(receivable({ sourceRevision: 1.5 }), [['invalid_type', '/sourceRevision']])
    await refused(receivable({ sourceRevision: '1' }), [['invalid_type', '/sourceRevision']])
    await refused(receivable({ sourceRevision: undefined }), [['invalid_type', '/sourceRevision']])
    const max = await accepted(receivable({ sourceRevision: 9007199254740991 }))
    assert.equal(max.json.sourceRevision, 9007199254740991)
    assert.equal((await accepted(receivable({ sourceRevision: 0 }))).json.sourceRevision, 0)
  })

  test('dates are calendar-valid YYYY-MM-DD', async () => {
    for (const dueDate of [
      '2026-02-30',
      '2025-02-29',
      '1900-02-29',
      '2026-13-01',
      '2026-00-10',
      '2026-2-28',
      '2026-02-28T00:00:00Z',
      '28/02/2026',
    ]) {
      await refused(receivable({ dueDate }), [['invalid_format', '/dueDate']])
    }
    for (const dueDate of ['2024-02-29', '2000-02-29', '2026-12-31']) {
      const res = await accepted(receivable({ dueDate }))
      assert.equal(res.json.dueDate, dueDate)
    }
  })

  test('sourceReference: 1 to 200 characters, never sensitive', async () => {
    await refused(receivable({ sourceReference: '' }), [['too_small', '/sourceReference']])
    await refused(receivable({ sourceReference: 'r'.repeat(201) }), [['too_big', '/sourceReference']])
    await refused(receivable({ sourceReference: 'ada@example.com' }), [['sensitive_source_reference', '/sourceReference']])
    await refused(receivable({ sourceReference: '123-45-6789' }), [['sensitive_source_reference', '/sourceReference']])
  })

  test('unknown keys are unrecognized_keys at the exact pointer, escaped as RFC 6901 requires', async () => {
    await refused(receivable({ collectionEnabled: true }), [['unrecognized_keys', '/collectionEnabled']])
    await refused(receivable({ status: 'closed' }), [['unrecognized_keys', '/status']])
    await refused(receivable({ 'a/b': 1, 'c~d': 2 }), [
      ['unrecognized_keys', '/a~1b'],
      ['unrecognized_keys', '/c~0d'],
    ])
  })

  test('several problems at once are all reported', async () => {
    await refused(receivable({ financialType: 'x', dueDate: '2026-02-30', sourceRevision: -1 }), [
      ['invalid_value', '/financialType'],
      ['too_small', '/sourceRevision'],
      ['invalid_format', '/dueDate'],
    ])
  })
})

describe('the request itself', () => {
  test('the path identifier is an ExternalId, checked before anything else', async () => {
    const bad = await put('bad%20id', receivable())
    assert.equal(bad.status, 422)
    assert.deepEqual(errors(bad), [['invalid_format', '/path/externalReceivableId']])
    const sensitive = await put('4111111111111111', receivable())
    assert.equal(sensitive.status, 422)
    assert.deepEqual(errors(sensitive), [['sensitive_external_id', '/path/externalReceivableId']])
  })

  test('a body that is not a JSON object', async () => {
    await refused([receivable()], [['invalid_type', '']])
    await refused(null, [['invalid_type', '']])
    const malformed = await t.call('PUT', `${base}/receivables/r-malformed`, { key: k.apiKey, rawBody: '{"financialType":' })
    assert.equal(malformed.status, 400)
    assert.equal(problemCode(malformed), 'malformed_json')
    const noBody = await t.call('PUT', `${base}/receivables/r-malformed`, { key: k.apiKey })
    assert.equal(noBody.status, 415)
    assert.equal(problemCode(noBody), 'unsupported_media_type')
    const text = await t.call('PUT', `${base}/receivables/r-malformed`, {
      key: k.apiKey,
      rawBody: JSON.stringify(receivable()),
      contentType: 'text/plain',
    })
    assert.equal(text.status, 415)
    assert.equal(problemCode(text), 'unsupported_media_type')
    assert.equal((await t.call('GET', `${base}/receivables/r-malformed`, { key: k.apiKey })).status, 404)
  })
})
