import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import fc from 'fast-check'
import { createKeyUsage } from '../../src/access/key-usage.ts'
import { UNSAFE_DISPLAY_CHARACTER } from '../../src/domain/display-text.ts'
import { problemCode, type Response, startTestApp, type Tenant, type TestApp } from '../helpers/app.ts'

/**
 * API keys with names, expiry, last use and rotation (issue 24 item 6; docs/operator-api.md). An expired key is
 * refused exactly like a revoked one on every path: a write (the gate on its own) and a one-read GET (on
 * PostgreSQL, the gate inside the read's one statement). The last use is recorded in memory and written by a
 * flush, never by the request.
 */
let now = new Date('2026-06-01T10:00:00.000Z')
const clock = { now: () => now }
const at = (iso: string) => {
  now = new Date(iso)
}

let t: TestApp
before(async () => {
  t = await startTestApp({}, { clock })
})
after(() => t.close())

const must = (r: Response, status: number) => {
  assert.equal(r.status, status, r.body)
  return r
}
const pointers = (r: Response) => (r.json.errors as { code: string; pointer: string }[]).map((e) => [e.code, e.pointer])

/** Customer reads (a one-read route) and writes (the gate on its own), with the key given. */
const read = (tenant: Tenant, key: string) => t.call('GET', `/v1/clients/${tenant.clientCode}/customers/nobody`, { key })
const write = (tenant: Tenant, key: string, id = 'cust-1') =>
  t.call('PUT', `/v1/clients/${tenant.clientCode}/customers/${id}`, {
    key,
    body: { type: 'person', name: { firstName: 'Ada', lastName: 'Lovelace' }, sourceReference: `src/${id}` },
  })

/** What an API-key request answers with `key`: the status and the problem, without the request id. */
async function refusal(tenant: Tenant, key: string) {
  const answers = [await read(tenant, key), await write(tenant, key)]
  return answers.map((r) => {
    const { requestId: _, ...rest } = r.json ?? {}
    return { status: r.status, problem: rest, authenticate: r.headers['www-authenticate'] ?? null }
  })
}

const keyCount = async () => Number((await t.store.query<{ n: string }>('SELECT count(*) AS n FROM api_keys'))[0]?.n)

describe('issuing a key with a name and an expiry', () => {
  test('name and expiresAt are kept and listed, never the key or its digest; omitted, the defaults', async () => {
    at('2026-06-01T10:00:00.000Z')
    const tenant = await t.tenant('k-names')
    at('2026-06-01T10:00:01.000Z')
    const made = must(
      await t.admin('POST', `/admin/v1/integrations/${tenant.integrationId}/api-keys`, {
        name: 'Core ledger, production',
        expiresAt: '2026-12-31T00:00:00Z',
      }),
      201,
    ).json
    assert.deepEqual(
      { ...made, apiKeyId: undefined, apiKey: undefined },
      {
        apiKeyId: undefined,
        apiKey: undefined,
        integrationId: tenant.integrationId,
        environment: 'sandbox',
        name: 'Core ledger, production',
        createdAt: '2026-06-01T10:00:01.000Z',
        expiresAt: '2026-12-31T00:00:00.000Z',
      },
    )
    const list = must(await t.admin('GET', `/admin/v1/integrations/${tenant.integrationId}/api-keys`), 200).json
    assert.deepEqual(list.data, [
      {
        apiKeyId: tenant.apiKeyId,
        integrationId: tenant.integrationId,
        environment: 'sandbox',
        name: 'Unnamed key',
        hint: `irk_sandbox_…${tenant.apiKey.slice(-4)}`,
        status: 'active',
        createdAt: '2026-06-01T10:00:00.000Z',
        expiresAt: null,
        lastUsedAt: null,
        revokedAt: null,
      },
      {
        apiKeyId: made.apiKeyId,
        integrationId: tenant.integrationId,
        environment: 'sandbox',
        name: 'Core ledger, production',
        hint: `irk_sandbox_…${made.apiKey.slice(-4)}`,
        status: 'active',
        createdAt: '2026-06-01T10:00:01.000Z',
        expiresAt: '2026-12-31T00:00:00.000Z',
        lastUsedAt: null,
        revokedAt: null,
      },
    ])
    const [digest] = (await t.store.query<{ digest: string }>('SELECT digest FROM api_keys WHERE api_key_id = $1', [made.apiKeyId])).map(
      (r) => r.digest,
    )
    const shown = JSON.stringify(list)
    assert.ok(!shown.includes(made.apiKey) && !shown.includes(String(digest)))
    // The audit event names the key and its settings, never the key or its digest.
    const audit = must(await t.admin('GET', '/admin/v1/audit-events?limit=200'), 200).json.data as { targetId: string; action: string }[]
    const created = audit.find((e) => e.targetId === made.apiKeyId)
    assert.deepEqual(created && { ...created, auditEventId: undefined, changeDigest: undefined }, {
      auditEventId: undefined,
      occurredAt: '2026-06-01T10:00:01.000Z',
      actor: 'operator',
      action: 'api_key.created',
      clientCode: null,
      targetType: 'api_key',
      targetId: made.apiKeyId,
      details: {
        integrationId: tenant.integrationId,
        environment: 'sandbox',
        name: 'Core ledger, production',
        expiresAt: '2026-12-31T00:00:00.000Z',
      },
      changeDigest: undefined,
    })
    assert.ok(!JSON.stringify(audit).includes(made.apiKey) && !JSON.stringify(audit).includes(String(digest)))
  })

  test('a past, present or malformed expiresAt is 422 at /expiresAt, and nothing is issued', async () => {
    at('2026-06-01T11:00:00.000Z')
    const tenant = await t.tenant('k-expiry-bad')
    const before = await keyCount()
    const path = `/admin/v1/integrations/${tenant.integrationId}/api-keys`
    const past = must(await t.admin('POST', path, { expiresAt: '2026-06-01T10:59:59.999Z' }), 422)
    assert.deepEqual(pointers(past), [['custom', '/expiresAt']])
    assert.match(past.json.errors[0].detail, /must be in the future \(the service's time is 2026-06-01T11:00:00\.000Z\)/)
    assert.deepEqual(pointers(must(await t.admin('POST', path, { expiresAt: '2026-06-01T11:00:00Z' }), 422)), [['custom', '/expiresAt']])
    for (const bad of ['2026-06-31T00:00:00Z', '2026-07-01', '2026-07-01T00:00:00+02:00', 'tomorrow', 1767225600, null]) {
      assert.deepEqual(
        pointers(must(await t.admin('POST', path, { expiresAt: bad }), 422)),
        [['invalid_format', '/expiresAt']].map(([c, p]) => [typeof bad === 'string' ? c : 'invalid_type', p]),
      )
    }
    assert.deepEqual(pointers(must(await t.admin('POST', path, { nickname: 'x' }), 422)), [['unrecognized_keys', '/nickname']])
    assert.equal(await keyCount(), before)
  })

  test('issue 33 item 7: a name with a bidirectional control is refused for what a name is (operators read it), nothing issued', async () => {
    at('2026-06-01T11:30:00.000Z')
    const tenant = await t.tenant('k-name-msg')
    const before = await keyCount()
    const r = must(await t.admin('POST', `/admin/v1/integrations/${tenant.integrationId}/api-keys`, { name: 'Core \u202eledger' }), 422)
    assert.deepEqual(r.json.errors, [
      {
        code: 'custom',
        detail: 'is shown to operators in lists and the audit trail and must not contain U+202E (a bidirectional control)',
        pointer: '/name',
      },
    ])
    assert.equal(await keyCount(), before)
  })

  test('name: 1 to 100 characters of display text, not blank (property)', async () => {
    at('2026-06-01T12:00:00.000Z')
    const tenant = await t.tenant('k-name-prop')
    const path = `/admin/v1/integrations/${tenant.integrationId}/api-keys`
    const unsafe = fc.constantFrom(
      '\u0000',
      '\u0009',
      '\u000a',
      '\u001f',
      '\u007f',
      '\u0085',
      '\u009f',
      '\u2028',
      '\u2029',
      '\u202e',
      '\u2066',
      '\u200b',
      '\ufeff',
    )
    const name = fc.oneof(
      fc.string({ minLength: 0, maxLength: 120 }),
      fc.string({ unit: 'grapheme', minLength: 1, maxLength: 60 }),
      fc.tuple(fc.string({ maxLength: 20 }), unsafe, fc.string({ maxLength: 20 })).map(([a, u, b]) => `${a}${u}${b}`),
      fc.constantFrom(' ', '   ', '\u00a0'),
    )
    await fc.assert(
      fc.asyncProperty(name, async (n) => {
        const length = [...n].length
        const stringLength = n.length
        const valid = stringLength >= 1 && stringLength <= 100 && !UNSAFE_DISPLAY_CHARACTER.test(n) && n.trim().length > 0
        const before = await keyCount()
        const r = await t.admin('POST', path, { name: n })
        if (valid) {
          assert.equal(r.status, 201, `${JSON.stringify(n)} (${length}): ${r.body}`)
          assert.equal(r.json.name, n)
          assert.equal(await keyCount(), before + 1)
        } else {
          assert.equal(r.status, 422, `${JSON.stringify(n)}: ${r.body}`)
          assert.ok(
            (r.json.errors as { pointer: string }[]).every((e) => e.pointer === '/name'),
            r.body,
          )
          assert.equal(await keyCount(), before)
        }
      }),
      { numRuns: 60 },
    )
  })
})

describe('an expired key', () => {
  test('answers 401 invalid_api_key exactly like a revoked one, on a read and on a write', async () => {
    at('2026-06-02T09:00:00.000Z')
    const tenant = await t.tenant('k-expired')
    const expiring = must(
      await t.admin('POST', `/admin/v1/integrations/${tenant.integrationId}/api-keys`, { expiresAt: '2026-06-02T10:00:00Z' }),
      201,
    ).json
    const revoked = must(await t.admin('POST', `/admin/v1/integrations/${tenant.integrationId}/api-keys`, {}), 201).json
    must(await t.admin('POST', `/admin/v1/api-keys/${revoked.apiKeyId}/revoke`, {}), 200)

    // Until its expiry the key works on both paths.
    at('2026-06-02T09:59:59.999Z')
    assert.equal((await read(tenant, expiring.apiKey)).status, 404)
    assert.equal((await write(tenant, expiring.apiKey)).status, 201)

    // At its expiry and after, it is refused like the revoked key: same status, same problem, nothing written.
    for (const time of ['2026-06-02T10:00:00.000Z', '2026-06-03T00:00:00.000Z']) {
      at(time)
      const expired = await refusal(tenant, expiring.apiKey)
      assert.deepEqual(expired, await refusal(tenant, revoked.apiKey))
      assert.deepEqual(
        expired.map((e) => [e.status, e.problem.type]),
        [
          [401, 'https://docs.irs.test/problems/invalid_api_key'],
          [401, 'https://docs.irs.test/problems/invalid_api_key'],
        ],
      )
    }
    assert.equal((await t.call('GET', `/v1/clients/${tenant.clientCode}/customers/cust-1`, { key: tenant.apiKey })).json.revision, 1)
    const shown = must(await t.admin('GET', `/admin/v1/api-keys/${expiring.apiKeyId}`), 200).json
    assert.deepEqual([shown.status, shown.expiresAt, shown.revokedAt], ['expired', '2026-06-02T10:00:00.000Z', null])
    assert.equal(must(await t.admin('GET', `/admin/v1/api-keys/${revoked.apiKeyId}`), 200).json.status, 'revoked')
  })
})

describe('rotation', () => {
  test('a new key at once, the old one working through the grace period and refused after it', async () => {
    at('2026-06-04T08:00:00.000Z')
    const tenant = await t.tenant('k-rotate')
    const renamed = must(await t.admin('POST', `/admin/v1/integrations/${tenant.integrationId}/api-keys`, { name: 'Ledger' }), 201).json
    at('2026-06-04T09:00:00.000Z')
    const rotated = must(await t.admin('POST', `/admin/v1/api-keys/${renamed.apiKeyId}/rotate`, { gracePeriodSeconds: 3600 }), 201).json
    assert.match(rotated.apiKey, /^irk_sandbox_[A-Za-z0-9]{40}$/)
    assert.notEqual(rotated.apiKeyId, renamed.apiKeyId)
    assert.deepEqual(
      { ...rotated, apiKeyId: undefined, apiKey: undefined },
      {
        apiKeyId: undefined,
        apiKey: undefined,
        integrationId: tenant.integrationId,
        environment: 'sandbox',
        name: 'Ledger',
        createdAt: '2026-06-04T09:00:00.000Z',
        expiresAt: null,
        rotated: {
          apiKeyId: renamed.apiKeyId,
          integrationId: tenant.integrationId,
          environment: 'sandbox',
          name: 'Ledger',
          hint: `irk_sandbox_…${renamed.apiKey.slice(-4)}`,
          status: 'active',
          createdAt: '2026-06-04T08:00:00.000Z',
          expiresAt: '2026-06-04T10:00:00.000Z',
          lastUsedAt: null,
          revokedAt: null,
        },
      },
    )
    assert.equal((await write(tenant, rotated.apiKey, 'c-new')).status, 201)
    at('2026-06-04T09:59:59.000Z')
    assert.equal((await write(tenant, renamed.apiKey, 'c-old')).status, 201)
    at('2026-06-04T10:00:00.000Z')
    assert.deepEqual(
      (await refusal(tenant, renamed.apiKey)).map((r) => r.status),
      [401, 401],
    )
    assert.equal((await read(tenant, rotated.apiKey)).status, 404)

    // Audited: the new key's creation (naming the old) and the old key's rotation; neither key nor digest.
    const audit = must(await t.admin('GET', `/admin/v1/audit-events?clientCode=${tenant.clientCode}&limit=200`), 200).json.data as {
      action: string
      targetId: string
      details: Record<string, unknown>
    }[]
    const mine = audit.filter((e) => e.targetId === rotated.apiKeyId || e.targetId === renamed.apiKeyId)
    assert.deepEqual(
      mine.map((e) => [e.action, e.targetId, e.details]),
      [
        [
          'api_key.created',
          renamed.apiKeyId,
          { integrationId: tenant.integrationId, environment: 'sandbox', name: 'Ledger', expiresAt: null },
        ],
        [
          'api_key.created',
          rotated.apiKeyId,
          { integrationId: tenant.integrationId, environment: 'sandbox', name: 'Ledger', expiresAt: null, rotatedFrom: renamed.apiKeyId },
        ],
        [
          'api_key.rotated',
          renamed.apiKeyId,
          {
            integrationId: tenant.integrationId,
            replacedBy: rotated.apiKeyId,
            gracePeriodSeconds: 3600,
            expiresAt: '2026-06-04T10:00:00.000Z',
          },
        ],
      ],
    )
    const digests = (await t.store.query<{ digest: string }>('SELECT digest FROM api_keys')).map((r) => r.digest)
    const text = JSON.stringify(audit)
    for (const secret of [renamed.apiKey, rotated.apiKey, ...digests]) assert.ok(!text.includes(secret))
  })

  test('grace 0 ends the old key at once; an earlier expiry is never pushed back; name and expiresAt of the new key', async () => {
    at('2026-06-05T08:00:00.000Z')
    const tenant = await t.tenant('k-rotate-0')
    const soon = must(
      await t.admin('POST', `/admin/v1/integrations/${tenant.integrationId}/api-keys`, { expiresAt: '2026-06-05T08:30:00Z' }),
      201,
    ).json
    const later = must(
      await t.admin('POST', `/admin/v1/api-keys/${soon.apiKeyId}/rotate`, {
        gracePeriodSeconds: 86400,
        name: 'Next year',
        expiresAt: '2027-06-05T00:00:00Z',
      }),
      201,
    ).json
    assert.deepEqual(
      [later.name, later.expiresAt, later.rotated.expiresAt],
      ['Next year', '2027-06-05T00:00:00.000Z', '2026-06-05T08:30:00.000Z'],
    )

    const once = must(await t.admin('POST', `/admin/v1/api-keys/${tenant.apiKeyId}/rotate`, { gracePeriodSeconds: 0 }), 201).json
    assert.deepEqual([once.rotated.status, once.rotated.expiresAt], ['expired', '2026-06-05T08:00:00.000Z'])
    assert.deepEqual(
      (await refusal(tenant, tenant.apiKey)).map((r) => r.status),
      [401, 401],
    )
    assert.equal((await read(tenant, once.apiKey)).status, 404)
  })

  test('a revoked or expired key is 409 api_key_inactive; an unknown one 404; a bad body 422; nothing issued', async () => {
    at('2026-06-06T08:00:00.000Z')
    const tenant = await t.tenant('k-rotate-bad')
    const gone = must(await t.admin('POST', `/admin/v1/integrations/${tenant.integrationId}/api-keys`, {}), 201).json
    must(await t.admin('POST', `/admin/v1/api-keys/${gone.apiKeyId}/revoke`, {}), 200)
    const short = must(
      await t.admin('POST', `/admin/v1/integrations/${tenant.integrationId}/api-keys`, { expiresAt: '2026-06-06T08:00:01Z' }),
      201,
    ).json
    at('2026-06-06T08:00:01.000Z')
    const before = await keyCount()
    const revoked = must(await t.admin('POST', `/admin/v1/api-keys/${gone.apiKeyId}/rotate`, { gracePeriodSeconds: 60 }), 409)
    assert.equal(problemCode(revoked), 'api_key_inactive')
    assert.equal(revoked.json.apiKeyStatus, 'revoked')
    const expired = must(await t.admin('POST', `/admin/v1/api-keys/${short.apiKeyId}/rotate`, { gracePeriodSeconds: 60 }), 409)
    assert.deepEqual([problemCode(expired), expired.json.apiKeyStatus], ['api_key_inactive', 'expired'])
    assert.equal(
      problemCode(must(await t.admin('POST', `/admin/v1/api-keys/ak_${'x'.repeat(24)}/rotate`, { gracePeriodSeconds: 60 }), 404)),
      'api_key_not_found',
    )
    const rotate = (body: unknown) => t.admin('POST', `/admin/v1/api-keys/${tenant.apiKeyId}/rotate`, body)
    assert.deepEqual(pointers(must(await rotate({}), 422)), [['invalid_type', '/gracePeriodSeconds']])
    assert.deepEqual(pointers(must(await rotate({ gracePeriodSeconds: -1 }), 422)), [['too_small', '/gracePeriodSeconds']])
    assert.deepEqual(pointers(must(await rotate({ gracePeriodSeconds: 2_592_001 }), 422)), [['too_big', '/gracePeriodSeconds']])
    assert.deepEqual(pointers(must(await rotate({ gracePeriodSeconds: 1.5 }), 422)), [['invalid_type', '/gracePeriodSeconds']])
    assert.deepEqual(pointers(must(await rotate({ gracePeriodSeconds: '60' }), 422)), [['invalid_type', '/gracePeriodSeconds']])
    assert.deepEqual(pointers(must(await rotate({ gracePeriodSeconds: 60, name: '' }), 422)), [['too_small', '/name']])
    assert.deepEqual(pointers(must(await rotate({ gracePeriodSeconds: 60, expiresAt: '2026-06-06T08:00:00Z' }), 422)), [
      ['custom', '/expiresAt'],
    ])
    assert.equal(await keyCount(), before)
    // The key refused a rotation is untouched.
    const key = must(await t.admin('GET', `/admin/v1/api-keys/${tenant.apiKeyId}`), 200).json
    assert.deepEqual([key.status, key.expiresAt], ['active', null])
  })

  test('16 rotations of one key at once: serialized on its row, each issues its own key, the shortest grace wins', async () => {
    at('2026-06-07T07:00:00.000Z')
    const tenant = await t.tenant('k-rotate-16')
    const graces = Array.from({ length: 16 }, (_, i) => 600 + i * 60)
    const answers = await Promise.all(
      graces.map((g) => t.admin('POST', `/admin/v1/api-keys/${tenant.apiKeyId}/rotate`, { gracePeriodSeconds: g })),
    )
    assert.deepEqual(
      answers.map((a) => a.status),
      graces.map(() => 201),
    )
    assert.equal(new Set(answers.map((a) => a.json.apiKeyId)).size, 16)
    const old = must(await t.admin('GET', `/admin/v1/api-keys/${tenant.apiKeyId}`), 200).json
    assert.deepEqual([old.status, old.expiresAt], ['active', '2026-06-07T07:10:00.000Z'])
    const keys = must(await t.admin('GET', `/admin/v1/integrations/${tenant.integrationId}/api-keys?limit=200`), 200).json.data
    assert.equal(keys.length, 17)
    const rotatedEvents = (
      must(await t.admin('GET', `/admin/v1/audit-events?clientCode=${tenant.clientCode}&limit=200`), 200).json.data as {
        action: string
        targetId: string
      }[]
    ).filter((e) => e.action === 'api_key.rotated' && e.targetId === tenant.apiKeyId)
    assert.equal(rotatedEvents.length, 16)
    // Every new key works.
    for (const a of answers) assert.equal((await read(tenant, a.json.apiKey)).status, 404)
  })

  test('the longest grace, 30 days, is accepted', async () => {
    at('2026-06-07T08:00:00.000Z')
    const tenant = await t.tenant('k-rotate-max')
    const r = must(await t.admin('POST', `/admin/v1/api-keys/${tenant.apiKeyId}/rotate`, { gracePeriodSeconds: 2_592_000 }), 201).json
    assert.equal(r.rotated.expiresAt, '2026-07-07T08:00:00.000Z')
  })
})

describe('last use', () => {
  const rowOf = async (apiKeyId: string) =>
    (
      await t.store.query<{ last_used_at: string | null; xmin: string }>(
        'SELECT last_used_at, xmin::text AS xmin FROM api_keys WHERE api_key_id = $1',
        [apiKeyId],
      )
    )[0]

  test('authenticating writes nothing; the flush writes the last use, at most once a minute per key', async () => {
    at('2026-06-08T08:00:00.000Z')
    const tenant = await t.tenant('k-used')
    const untouched = await rowOf(tenant.apiKeyId)
    // A read, a write, a refused request (no grant for that client): the key authenticated each of them.
    assert.equal((await read(tenant, tenant.apiKey)).status, 404)
    at('2026-06-08T08:00:10.000Z')
    assert.equal((await write(tenant, tenant.apiKey)).status, 201)
    assert.equal((await t.call('GET', '/v1/clients/k-names/customers/x', { key: tenant.apiKey })).status, 403)
    // The row was never written by the requests: same version, no last use yet.
    assert.deepEqual(await rowOf(tenant.apiKeyId), untouched)
    assert.equal(untouched?.last_used_at, null)

    at('2026-06-08T08:00:15.000Z')
    await t.app.keyUsage.flush()
    assert.equal((await rowOf(tenant.apiKeyId))?.last_used_at, '2026-06-08T08:00:10.000Z')
    const listed = must(await t.admin('GET', `/admin/v1/api-keys/${tenant.apiKeyId}`), 200).json
    assert.equal(listed.lastUsedAt, '2026-06-08T08:00:10.000Z')

    // Used again within the minute: nothing is written until this process's minute is over.
    at('2026-06-08T08:00:40.000Z')
    assert.equal((await read(tenant, tenant.apiKey)).status, 404)
    const written = await rowOf(tenant.apiKeyId)
    at('2026-06-08T08:00:50.000Z')
    assert.equal(await t.app.keyUsage.flush(), 0)
    assert.deepEqual(await rowOf(tenant.apiKeyId), written)
    // A minute after the last write, the use waiting in memory is due; it lies within a minute of the stored
    // time, so the statement leaves the row alone (accurate to a minute).
    at('2026-06-08T08:01:20.000Z')
    assert.equal(await t.app.keyUsage.flush(), 0)
    assert.deepEqual(await rowOf(tenant.apiKeyId), written)
    // A use more than a minute after the stored one is written.
    at('2026-06-08T08:02:30.000Z')
    assert.equal((await read(tenant, tenant.apiKey)).status, 404)
    at('2026-06-08T08:02:35.000Z')
    assert.equal(await t.app.keyUsage.flush(), 1)
    assert.equal((await rowOf(tenant.apiKeyId))?.last_used_at, '2026-06-08T08:02:30.000Z')
    // An unknown or expired key records nothing.
    assert.equal(t.app.keyUsage.pending(), 0)
    assert.equal((await read(tenant, `irk_sandbox_${'Z'.repeat(40)}`)).status, 401)
    assert.equal(t.app.keyUsage.pending(), 0)
  })

  test('the worker writes what is pending when the process stops', async () => {
    at('2026-06-08T09:00:00.000Z')
    const tenant = await t.tenant('k-used-stop')
    assert.equal((await read(tenant, tenant.apiKey)).status, 404)
    const worker = t.app.workers.find((w) => w.name === 'api-key-usage')
    assert.ok(worker)
    // Started and stopped before its first turn (15 s away): only the stop's flush can have written it.
    worker.start()
    await worker.stop()
    assert.equal((await rowOf(tenant.apiKeyId))?.last_used_at, '2026-06-08T09:00:00.000Z')
  })

  test('several instances flushing the same key: written at most once a minute, never backwards', async () => {
    at('2026-06-09T08:00:00.000Z')
    const tenant = await t.tenant('k-used-many')
    // Sixteen instances' memories (createKeyUsage each), sharing the one database.
    const instances = Array.from({ length: 16 }, () => createKeyUsage({ db: t.store, clock }))
    instances.forEach((u, i) => {
      at(new Date(Date.parse('2026-06-09T08:00:00.000Z') + i * 1000).toISOString())
      u.record(tenant.apiKeyId)
    })
    at('2026-06-09T08:00:30.000Z')
    const written = await Promise.all(instances.map((u) => u.flush()))
    // Each use lies within a minute of every other: exactly one instance's statement changed the row.
    assert.equal(
      written.reduce((a, b) => a + b, 0),
      1,
    )
    const stored = (await rowOf(tenant.apiKeyId))?.last_used_at
    assert.ok(stored && stored >= '2026-06-09T08:00:00.000Z' && stored <= '2026-06-09T08:00:15.000Z', String(stored))
    // A later use (a minute and more after the stored one) moves it forward; an older one never moves it back.
    at('2026-06-09T08:02:00.000Z')
    instances[3]?.record(tenant.apiKeyId)
    at('2026-06-09T08:00:05.000Z')
    instances[4]?.record(tenant.apiKeyId)
    at('2026-06-09T08:03:00.000Z')
    const again = await Promise.all(instances.map((u) => u.flush()))
    assert.equal(
      again.reduce((a, b) => a + b, 0),
      1,
    )
    assert.equal((await rowOf(tenant.apiKeyId))?.last_used_at, '2026-06-09T08:02:00.000Z')
  })
})
