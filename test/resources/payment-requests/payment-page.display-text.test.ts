import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import fc from 'fast-check'
import { problemCode, startTestApp, type Tenant, type TestApp } from '../../helpers/app.ts'
import { payableReceivable } from '../../helpers/payments.ts'

/**
 * Issue 20, item 6: text the hosted page shows a debtor (a Payment request's description, the creditor's name set
 * through the operator API) refuses bidirectional controls, U+2028/U+2029 and every C0 and C1 control: 422
 * `custom` at the field, and nothing stored. U+0000 is left out of the generator: the JSON body parser refuses it
 * before any schema (a 422 of its own, test/api/unicode.test.ts).
 */

const UNSAFE: number[] = [
  ...Array.from({ length: 0x1f }, (_, i) => i + 1),
  0x7f,
  ...Array.from({ length: 0x20 }, (_, i) => 0x80 + i),
  0x2028,
  0x2029,
  0x202a,
  0x202b,
  0x202c,
  0x202d,
  0x202e,
  0x2066,
  0x2067,
  0x2068,
  0x2069,
  // Issue 33 item 7: bidirectional marks and invisible characters (docs/decisions.md, "Text shown to the debtor").
  0x00ad,
  0x061c,
  0x115f,
  0x1160,
  0x180e,
  0x200b,
  0x200c,
  0x200d,
  0x200e,
  0x200f,
  0x2060,
  0x2061,
  0x2062,
  0x2063,
  0x2064,
  0x206a,
  0x206f,
  0x3164,
  0xfeff,
  0xffa0,
  0xfff9,
  0xfffb,
  0xe0001,
  0xe0041,
  0xe007f,
]

const hex = (n: number) => `U+${n.toString(16).toUpperCase().padStart(4, '0')}`
const BIDI = [0x061c, 0x200e, 0x200f, 0x202a, 0x202b, 0x202c, 0x202d, 0x202e, 0x2066, 0x2067, 0x2068, 0x2069]
const kind = (n: number) =>
  n === 0x2028 || n === 0x2029
    ? 'a line or paragraph separator'
    : BIDI.includes(n)
      ? 'a bidirectional control'
      : n <= 0x9f
        ? 'a control character'
        : 'an invisible character'

/** Otherwise valid text (letters, spaces, accented letters: nothing that looks like account data) around it. */
const around = fc.string({ unit: fc.constantFrom(...'abcXYZ éü€'.split('')), maxLength: 20 })
const hostile = fc.record({ before: around, char: fc.constantFrom(...UNSAFE), after: around })

let t: TestApp
let tenant: Tenant
let receivableId: string
before(async () => {
  t = await startTestApp()
  tenant = await t.tenant('shown')
  receivableId = await payableReceivable(t, tenant, 'rcv-shown')
})
after(() => t.close())

test('the classic, "Pay to <U+202E>moc.live<U+202C> now": refused at /description; the same text without the controls is accepted', async () => {
  const put = (id: string, description: string) =>
    t.call('PUT', `/v1/clients/shown/payment-requests/${id}`, {
      key: tenant.apiKey,
      body: { externalReceivableId: receivableId, amount: { amount: '1.00', currency: 'USD' }, description },
    })
  const res = await put('pr-bidi', 'Pay to \u202Emoc.live\u202C now')
  assert.equal(res.status, 422)
  assert.deepEqual(res.json.errors, [
    { code: 'custom', detail: 'is shown to the debtor and must not contain U+202E (a bidirectional control)', pointer: '/description' },
  ])
  assert.equal((await put('pr-clean', 'Pay to moc.live now')).status, 201)
})

test('issue 33 item 7: the invisible and bidirectional characters the issue found, each named in its 422', async () => {
  for (const [char, detail] of [
    ['\u200B', 'U+200B (an invisible character)'],
    ['\u200F', 'U+200F (a bidirectional control)'],
    ['\u061C', 'U+061C (a bidirectional control)'],
    ['\uFEFF', 'U+FEFF (an invisible character)'],
    ['\u2060', 'U+2060 (an invisible character)'],
    ['\u{E0041}', 'U+E0041 (an invisible character)'],
  ] as const) {
    const res = await t.admin('PUT', '/admin/v1/clients/shown', { name: `Shown${char} Credit Union` })
    assert.equal(res.status, 422, res.body)
    assert.deepEqual(res.json.errors, [
      { code: 'custom', detail: `is shown to the debtor and must not contain ${detail}`, pointer: '/name' },
    ])
  }
  // Letters of every script, and a no-break space, are text, not controls.
  const ok = await t.admin('PUT', '/admin/v1/clients/shown', { name: 'Caisse Populaire Ñandú 信用合作社 مصرف\u00A0Union' })
  assert.equal(ok.status, 200, ok.body)
})

test('a description with any such character: 422 custom at /description, and no Payment request stored', async () => {
  let n = 0
  await fc.assert(
    fc.asyncProperty(hostile, async ({ before, char, after }) => {
      const id = `pr-x-${n++}`
      const description = `Rent ${before}${String.fromCodePoint(char)}${after}`
      const res = await t.call('PUT', `/v1/clients/shown/payment-requests/${id}`, {
        key: tenant.apiKey,
        body: { externalReceivableId: receivableId, amount: { amount: '1.00', currency: 'USD' }, description },
      })
      assert.equal(res.status, 422, res.body)
      assert.equal(problemCode(res), 'validation_error')
      assert.deepEqual(res.json.errors, [
        { code: 'custom', detail: `is shown to the debtor and must not contain ${hex(char)} (${kind(char)})`, pointer: '/description' },
      ])
      const read = await t.call('GET', `/v1/clients/shown/payment-requests/${id}`, { key: tenant.apiKey })
      assert.equal(read.status, 404)
    }),
    { numRuns: 60 },
  )
})

test("the creditor's name through PUT /admin/v1/clients/{clientCode}: 422 custom at /name, and the name stays as it was", async () => {
  assert.equal((await t.admin('PUT', '/admin/v1/clients/shown', { name: 'Shown Credit Union' })).status, 200)
  await fc.assert(
    fc.asyncProperty(hostile, async ({ before, char, after }) => {
      const name = `Bank ${before}${String.fromCodePoint(char)}${after}`
      const res = await t.admin('PUT', '/admin/v1/clients/shown', { name, collectionEnabled: false })
      assert.equal(res.status, 422, res.body)
      assert.deepEqual(res.json.errors, [
        { code: 'custom', detail: `is shown to the debtor and must not contain ${hex(char)} (${kind(char)})`, pointer: '/name' },
      ])
      const read = await t.admin('GET', '/admin/v1/clients/shown')
      assert.equal(read.json.name, 'Shown Credit Union')
      assert.equal(read.json.collectionEnabled, true)
    }),
    { numRuns: 60 },
  )
})
