import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import fc from 'fast-check'
import { problemCode, startTestApp, type Tenant, type TestApp } from '../../helpers/app.ts'

let t: TestApp
let k: Tenant
before(async () => {
  t = await startTestApp()
  k = await t.tenant('cust')
})
after(() => t.close())

const base = '/v1/clients/cust/customers'
const person = { type: 'person', name: { firstName: 'Ada', lastName: 'Lovelace' }, sourceReference: 'ledger/c/1' }
const contact = (id: string | undefined, extra: Record<string, unknown> = {}) => ({
  ...(id ? { externalContactId: id } : {}),
  fullName: `Contact ${id ?? 'anon'}`,
  isCustomerSelf: false,
  isMain: false,
  ...extra,
})
const put = (id: string, body: unknown) => t.call('PUT', `${base}/${id}`, { key: k.apiKey, body })
const patch = (id: string, body: unknown) => t.call('PATCH', `${base}/${id}`, { key: k.apiKey, body })
const get = (id: string) => t.call('GET', `${base}/${id}`, { key: k.apiKey })
const events = (id: string) =>
  t.store.query<{ type: string; revision: string }>(
    `SELECT type, revision::text FROM change_events WHERE client_code = 'cust' AND resource_type = 'customer' AND resource_id = $1 ORDER BY seq`,
    [id],
  )

describe('PUT, retry, replace', () => {
  test('create 201, identical retry 200 (key order ignored), replace 200 with revision 2, one event each', async () => {
    const created = await put('c-1', person)
    assert.equal(created.status, 201)
    assert.deepEqual(created.json, {
      ...person,
      externalCustomerId: 'c-1',
      contacts: [],
      restrictions: [],
      revision: 1,
      updatedAt: created.json.updatedAt,
    })
    const reordered = await t.call('PUT', `${base}/c-1`, {
      key: k.apiKey,
      rawBody: '{ "sourceReference": "ledger/c/1", "name": {"lastName":"Lovelace","firstName":"Ada"}, "type": "person" }',
    })
    assert.equal(reordered.status, 200)
    assert.deepEqual(reordered.json, created.json)
    const replaced = await put('c-1', { ...person, name: { firstName: 'Augusta', lastName: 'King' } })
    assert.equal(replaced.status, 200)
    assert.equal(replaced.json.revision, 2)
    assert.equal(replaced.json.name.firstName, 'Augusta')
    assert.deepEqual(await events('c-1'), [
      { type: 'customer.created', revision: '1' },
      { type: 'customer.updated', revision: '2' },
    ])
    assert.deepEqual((await get('c-1')).json, replaced.json)
  })

  test('an organization has a legal name', async () => {
    const org = { type: 'organization', name: { legalName: 'Acme Ltd' }, sourceReference: 'ledger/o/1' }
    assert.equal((await put('org-1', org)).status, 201)
    assert.deepEqual((await get('org-1')).json.name, { legalName: 'Acme Ltd' })
  })
})

describe('contacts are matched by externalContactId', () => {
  test('known updated, new added, omitted deactivated, omitted list leaves them alone, re-sent id re-activates', async () => {
    assert.equal((await put('c-ct', { ...person, contacts: [contact('a'), contact('b')] })).status, 201)
    const updated = await put('c-ct', { ...person, contacts: [contact('a', { fullName: 'A renamed' }), contact('c')] })
    assert.equal(updated.status, 200)
    assert.deepEqual(
      updated.json.contacts.map((c: { externalContactId: string; fullName: string }) => [c.externalContactId, c.fullName]),
      [
        ['a', 'A renamed'],
        ['c', 'Contact c'],
      ],
    )
    const untouched = await put('c-ct', { ...person, name: { firstName: 'X', lastName: 'Y' } })
    assert.equal(untouched.json.contacts.length, 2)
    const [row] = await t.store.query<{ deactivated_contacts: { externalContactId: string }[] }>(
      `SELECT deactivated_contacts FROM customers WHERE client_code = 'cust' AND external_customer_id = 'c-ct'`,
    )
    assert.deepEqual(
      row?.deactivated_contacts.map((c) => c.externalContactId),
      ['b'],
    )
    const back = await put('c-ct', {
      ...person,
      name: { firstName: 'X', lastName: 'Y' },
      contacts: [contact('b'), contact('a', { fullName: 'A renamed' }), contact('c')],
    })
    assert.deepEqual(
      back.json.contacts.map((c: { externalContactId: string }) => c.externalContactId),
      ['a', 'b', 'c'],
    )
  })

  test('409 contact_update_unsupported when a contact lacks an id, unless nothing changes', async () => {
    assert.equal((await put('c-noid', { ...person, contacts: [contact(undefined)] })).status, 201)
    assert.equal((await put('c-noid', { ...person, contacts: [contact(undefined)] })).status, 200)
    const changed = await put('c-noid', { ...person, contacts: [contact(undefined, { fullName: 'Other' })] })
    assert.equal(changed.status, 409)
    assert.equal(problemCode(changed), 'contact_update_unsupported')
    const withId = await put('c-noid', { ...person, contacts: [contact('z')] })
    assert.equal(withId.status, 409)
    assert.equal((await get('c-noid')).json.contacts[0].fullName, 'Contact anon')
    assert.equal((await put('c-id', { ...person, contacts: [contact('a')] })).status, 201)
    assert.equal(problemCode(await put('c-id', { ...person, contacts: [contact('a'), contact(undefined)] })), 'contact_update_unsupported')
  })
})

describe('PATCH is an RFC 7396 merge patch validated as a complete Customer', () => {
  test('nested change, null removes an optional member, no-op keeps the revision, contacts null deactivates all', async () => {
    assert.equal(
      (await put('c-p', { ...person, contacts: [contact('a', { email: { address: 'a@example.com', type: 'work' } })] })).status,
      201,
    )
    const renamed = await patch('c-p', { name: { firstName: 'Grace' } })
    assert.equal(renamed.status, 200)
    assert.deepEqual(renamed.json.name, { firstName: 'Grace', lastName: 'Lovelace' })
    assert.equal(renamed.json.revision, 2)
    const noop = await patch('c-p', { name: { firstName: 'Grace' } })
    assert.equal(noop.status, 200)
    assert.equal(noop.json.revision, 2)
    const cleared = await patch('c-p', { contacts: null })
    assert.deepEqual(cleared.json.contacts, [])
    assert.equal(cleared.json.revision, 3)
  })

  test('an invalid result, unknown members and a missing Customer', async () => {
    assert.equal((await put('c-p2', person)).status, 201)
    const noName = await patch('c-p2', { name: null })
    assert.equal(noName.status, 422)
    assert.deepEqual(
      noName.json.errors.map((e: { pointer: string }) => e.pointer),
      ['/name'],
    )
    const unknown = await patch('c-p2', { nickname: 'Ada' })
    assert.deepEqual(
      unknown.json.errors.map((e: { code: string; pointer: string }) => [e.code, e.pointer]),
      [['unrecognized_keys', '/nickname']],
    )
    assert.equal((await get('c-p2')).json.revision, 1)
    const missing = await patch('c-none', { name: { firstName: 'A' } })
    assert.equal(missing.status, 404)
    assert.equal(problemCode(missing), 'customer_not_found')
  })
})

describe('reads and lists', () => {
  test('GET of a missing Customer is 404 customer_not_found', async () => {
    const res = await get('nobody')
    assert.equal(res.status, 404)
    assert.equal(problemCode(res), 'customer_not_found')
  })

  test('cursor paging visits every Customer once, in identifier order', async () => {
    const c = await t.tenant('cust-list')
    const ids = Array.from({ length: 7 }, (_, i) => `L-${String.fromCharCode(103 - i)}`)
    for (const id of ids)
      assert.equal((await t.call('PUT', `/v1/clients/cust-list/customers/${id}`, { key: c.apiKey, body: person })).status, 201)
    const seen: string[] = []
    let cursor: string | null = null
    let pages = 0
    do {
      const res = await t.call('GET', `/v1/clients/cust-list/customers?limit=3${cursor ? `&cursor=${cursor}` : ''}`, { key: c.apiKey })
      assert.equal(res.status, 200)
      seen.push(...res.json.data.map((x: { externalCustomerId: string }) => x.externalCustomerId))
      cursor = res.json.nextCursor
      pages++
    } while (cursor)
    assert.deepEqual(seen, [...ids].sort())
    assert.equal(pages, 3)
  })

  test('bad query parameters', async () => {
    for (const [q, pointer, code] of [
      ['limit=0', '/query/limit', 'too_small'],
      ['limit=201', '/query/limit', 'too_big'],
      ['limit=x', '/query/limit', 'invalid_type'],
      ['cursor=!!', '/query/cursor', 'invalid_format'],
      ['cursor=abc', '/query/cursor', 'invalid_format'],
      ['sort=name', '/query/sort', 'unrecognized_keys'],
    ]) {
      const res = await t.call('GET', `${base}?${q}`, { key: k.apiKey })
      assert.equal(res.status, 422, q)
      assert.deepEqual(
        res.json.errors.map((e: { code: string; pointer: string }) => [e.code, e.pointer]),
        [[code, pointer]],
        q,
      )
    }
  })
})

describe('field rules', () => {
  const s200 = 'x'.repeat(200)
  const cases: [string, unknown, [string, string][]][] = [
    ['missing type', { name: person.name, sourceReference: 'r/1' }, [['invalid_union', '/type']]],
    ['unknown type', { ...person, type: 'robot' }, [['invalid_union', '/type']]],
    ['empty first name', { ...person, name: { firstName: '', lastName: 'L' } }, [['too_small', '/name/firstName']]],
    ['201-char last name', { ...person, name: { firstName: 'A', lastName: `${s200}x` } }, [['too_big', '/name/lastName']]],
    ['unknown top-level key', { ...person, email: 'x' }, [['unrecognized_keys', '/email']]],
    ['unknown nested key', { ...person, name: { ...person.name, middle: 'M' } }, [['unrecognized_keys', '/name/middle']]],
    ['9 contacts', { ...person, contacts: Array.from({ length: 9 }, (_, i) => contact(`k${i}`)) }, [['too_big', '/contacts']]],
    ['duplicate contact id', { ...person, contacts: [contact('a'), contact('a')] }, [['custom', '/contacts/1/externalContactId']]],
    [
      'two main contacts',
      { ...person, contacts: [contact('a', { isMain: true }), contact('b', { isMain: true })] },
      [['custom', '/contacts/1/isMain']],
    ],
    ['bad contact id', { ...person, contacts: [contact('a b')] }, [['invalid_format', '/contacts/0/externalContactId']]],
    [
      'bad email',
      { ...person, contacts: [contact('a', { email: { address: 'nope', type: 'work' } })] },
      [['invalid_format', '/contacts/0/email/address']],
    ],
    [
      'bad phone',
      { ...person, contacts: [contact('a', { phone: { number: '0123', type: 'mobile' } })] },
      [['invalid_format', '/contacts/0/phone/number']],
    ],
    [
      'bad phone type',
      { ...person, contacts: [contact('a', { phone: { number: '+447700900123', type: 'pager' } })] },
      [['invalid_value', '/contacts/0/phone/type']],
    ],
    [
      'bad country',
      { ...person, contacts: [contact('a', { address: { countryCode: 'gb', line1: 'x', type: 'home' } })] },
      [['invalid_format', '/contacts/0/address/countryCode']],
    ],
    ['two addresses', { ...person, contacts: [contact('a', { address: [] })] }, [['invalid_type', '/contacts/0/address']]],
    ['sourceReference e-mail', { ...person, sourceReference: 'ada@example.com' }, [['sensitive_source_reference', '/sourceReference']]],
    ['sourceReference phone', { ...person, sourceReference: 'call +44 7700 900123' }, [['sensitive_source_reference', '/sourceReference']]],
    [
      'sourceReference card',
      { ...person, sourceReference: 'card 4111 1111 1111 1111' },
      [['sensitive_source_reference', '/sourceReference']],
    ],
    [
      'sourceReference IBAN',
      { ...person, sourceReference: 'GB82WEST12345698765432' },
      [['sensitive_source_reference', '/sourceReference']],
    ],
    ['sourceReference SSN', { ...person, sourceReference: 'ssn 123-45-6789' }, [['sensitive_source_reference', '/sourceReference']]],
    ['sourceReference NINO', { ...person, sourceReference: 'AB123456C' }, [['sensitive_source_reference', '/sourceReference']]],
    [
      'sourceReference account number',
      { ...person, sourceReference: 'acct/123456789' },
      [['sensitive_source_reference', '/sourceReference']],
    ],
    ['restriction twice', { ...person, restrictions: [{ type: 'hardship' }, { type: 'hardship' }] }, [['custom', '/restrictions/1/type']]],
  ]
  for (const [what, body, expected] of cases) {
    test(`${what}: 422 with exactly ${expected.map((e) => e.join(' at ')).join(', ')}`, async () => {
      const res = await put('c-rules', body)
      assert.equal(res.status, 422, res.body)
      assert.equal(problemCode(res), 'validation_error')
      assert.deepEqual(
        res.json.errors.map((e: { code: string; pointer: string }) => [e.code, e.pointer]),
        expected,
      )
    })
  }
  test('bounds that pass: 1 and 200 characters, 8 contacts, opaque references', async () => {
    const ok = {
      ...person,
      name: { firstName: 'A', lastName: s200 },
      sourceReference: 'ledger/loans/LN-778812',
      contacts: Array.from({ length: 8 }, (_, i) => contact(`k${i}`)),
    }
    assert.equal((await put('c-bounds', ok)).status, 201)
    assert.equal((await put('cust-0001', person)).status, 201)
  })
})

describe('property: random bodies never cause a 5xx and a refusal changes nothing', () => {
  test('PUT and PATCH with arbitrary JSON', async () => {
    assert.equal((await put('c-prop', { ...person, contacts: [contact('a')] })).status, 201)
    const snapshot = async () =>
      JSON.stringify(
        await t.store.query(
          `SELECT representation, revision, updated_at FROM customers WHERE client_code = 'cust' AND external_customer_id = 'c-prop'`,
        ),
      )
    const valid = fc.record({
      type: fc.constantFrom('person', 'organization', 'robot'),
      name: fc.oneof(fc.record({ firstName: fc.string(), lastName: fc.string() }), fc.anything()),
      sourceReference: fc.oneof(fc.string(), fc.anything()),
      contacts: fc.oneof(fc.constant(undefined), fc.array(fc.anything(), { maxLength: 10 })),
    })
    const bodies = fc.oneof(fc.anything(), fc.object(), valid)
    await fc.assert(
      fc.asyncProperty(bodies, fc.boolean(), async (body, usePatch) => {
        const before = await snapshot()
        const res = usePatch ? await patch('c-prop', body) : await put('c-prop', body)
        assert.ok(res.status < 500, `${res.status} ${res.body}`)
        if (res.status >= 400) assert.equal(await snapshot(), before)
        else if (res.status === 200) {
          // An accepted random body changed the Customer; put it back for the next run.
          await put('c-prop', { ...person, contacts: [contact('a')] })
        }
      }),
      { numRuns: 150 },
    )
  })
})
