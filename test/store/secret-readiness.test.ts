import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { keyId } from '../../src/domain/key-ring.ts'
import { startTestApp, type TestApp } from '../helpers/app.ts'
import { createTestDatabase, engineName, type TestDatabase } from '../helpers/store.ts'

/**
 * Issue 33 item 9: no instance re-encrypts stored secrets when it starts (another instance may not hold its key),
 * and an instance whose key ring cannot open some of them says so in /readyz, still 200 while the store answers.
 * Each start is a new app on the same database, as a restarted instance is.
 */
const K1 = '11'.repeat(32)
const K2 = '22'.repeat(32)
const K3 = '33'.repeat(32)
const idOf = (hex: string) => keyId(Buffer.from(hex, 'hex'))
const resolver = async () => [{ address: '93.184.215.14', family: 4 as const }]

let db: TestDatabase
let t: TestApp | undefined
before(async () => {
  db = await createTestDatabase()
})
after(async () => {
  await t?.close()
  await db.drop()
})

async function start(env: Record<string, string>): Promise<TestApp> {
  await t?.app.app.close()
  t = await startTestApp(env, { db, resolver })
  return t
}

const keyIds = async () =>
  (
    await db.store.query<{ k: string }>('SELECT split_part(secret_ciphertext, $1, 2) AS k FROM webhook_endpoints ORDER BY client_code', [
      '.',
    ])
  ).map((r) => r.k)

describe(`the key ring at start and in /readyz (${engineName})`, () => {
  test('a start with a new current key moves nothing; /readyz is plain while every secret opens', async () => {
    let app = await start({ WEBHOOK_SECRET_KEY: K1 })
    for (const client of ['rz-a', 'rz-b']) {
      const k = await app.tenant(client)
      const put = await app.call('PUT', `/v1/clients/${client}/webhook-endpoint`, {
        key: k.apiKey,
        body: { url: `https://hooks.${client}.com/x` },
      })
      assert.equal(put.status, 201, put.body)
    }
    assert.deepEqual(await keyIds(), [idOf(K1), idOf(K1)])
    app = await start({ WEBHOOK_SECRET_KEY: K2, WEBHOOK_SECRET_KEY_PREVIOUS: K1 })
    assert.deepEqual(await keyIds(), [idOf(K1), idOf(K1)], 'nothing re-encrypted at start')
    const ready = await app.call('GET', '/readyz')
    assert.deepEqual([ready.status, ready.json], [200, { status: 'ready' }])
  })

  test('an instance without the key: 200 with a degraded note naming the count and the fix; nothing changed in the store', async () => {
    const app = await start({ WEBHOOK_SECRET_KEY: K3 })
    const ready = await app.call('GET', '/readyz')
    assert.equal(ready.status, 200)
    assert.deepEqual(ready.json, {
      status: 'ready',
      degraded: [
        {
          code: 'unreadable_secrets',
          count: 2,
          detail:
            '2 stored secrets are encrypted under a key this instance does not hold: add that key to its WEBHOOK_SECRET_KEY_PREVIOUS and restart it (docs/operations.md, "Rotating WEBHOOK_SECRET_KEY").',
        },
      ],
    })
    assert.deepEqual(await keyIds(), [idOf(K1), idOf(K1)])
  })

  test("the operator's rewrap on an instance holding both keys, then the old key retired: /readyz plain again", async () => {
    let app = await start({ WEBHOOK_SECRET_KEY: K2, WEBHOOK_SECRET_KEY_PREVIOUS: K1 })
    const rewrap = await app.admin('POST', '/admin/v1/secrets/rewrap', {})
    assert.deepEqual([rewrap.status, rewrap.json], [200, { rewrapped: 2, undecryptable: 0 }])
    assert.deepEqual(await keyIds(), [idOf(K2), idOf(K2)])
    app = await start({ WEBHOOK_SECRET_KEY: K2 })
    assert.deepEqual((await app.call('GET', '/readyz')).json, { status: 'ready' })
  })
})
