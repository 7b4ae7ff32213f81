import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import type net from 'node:net'
import { after, before, describe, test } from 'node:test'
import { promisify } from 'node:util'
import { createKeyRing } from '../../src/domain/key-ring.ts'
import { secretAad } from '../../src/resources/webhooks/secrets.ts'
import { ADMIN_TOKEN, startTestApp, type TestApp } from '../helpers/app.ts'
import { engineName } from '../helpers/store.ts'

/*
 * `inbound secrets rewrap` run as a child process against the real app (WEBHOOK_SECRET_KEY K2, previous K1)
 * listening on a loopback port: one signing secret still under K1 (as an instance not yet restarted would have
 * written it) and one under a key nobody has any more.
 */
const run = promisify(execFile)
const K1 = Buffer.alloc(32, 0x41)
const K2 = Buffer.alloc(32, 0x42)
const LOST = Buffer.alloc(32, 0x43)
let t: TestApp
let url: string

async function cli(args: string[]) {
  try {
    const { stdout, stderr } = await run(process.execPath, ['--import', 'tsx', 'src/cli/inbound.ts', ...args], {
      env: { ...process.env, INBOUND_URL: url, ADMIN_TOKEN },
    })
    return { code: 0, stdout, stderr }
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string }
    return { code: e.code, stdout: e.stdout, stderr: e.stderr }
  }
}

/** An endpoint whose stored secret is then replaced by the same kind of secret under `key`. */
async function endpointUnder(client: string, key: Buffer) {
  const tenant = await t.tenant(client)
  const put = await t.call('PUT', `/v1/clients/${client}/webhook-endpoint`, {
    key: tenant.apiKey,
    body: { url: 'https://hooks.acme.com/x' },
  })
  assert.equal(put.status, 201, put.body)
  const ciphertext = createKeyRing(key).encrypt(secretAad(client, tenant.integrationId), put.json.signingSecret)
  await t.store.query('UPDATE webhook_endpoints SET secret_ciphertext = $2 WHERE client_code = $1', [client, ciphertext])
}

before(async () => {
  const resolver = async () => [{ address: '93.184.215.14', family: 4 as const }]
  t = await startTestApp({ WEBHOOK_SECRET_KEY: K2.toString('hex'), WEBHOOK_SECRET_KEY_PREVIOUS: K1.toString('hex') }, { resolver })
  await t.app.app.listen({ host: '127.0.0.1', port: 0 })
  url = `http://127.0.0.1:${(t.app.app.server.address() as net.AddressInfo).port}`
  await endpointUnder('cli-k1', K1)
  await endpointUnder('cli-lost', LOST)
})
after(() => t.close())

describe(`inbound secrets rewrap (${engineName})`, () => {
  test('re-encrypts what a previous key opens, reports what none opens; again: nothing left to move', async () => {
    assert.deepEqual(await cli(['secrets', 'rewrap']), {
      code: 0,
      stdout:
        '1 re-encrypted under the current key, 1 undecryptable\n' +
        'No configured key opens those: set WEBHOOK_SECRET_KEY_PREVIOUS to the key they were encrypted under.\n',
      stderr: '',
    })
    const rows = await t.store.query<{ client_code: string; secret_ciphertext: string }>(
      `SELECT client_code, secret_ciphertext FROM webhook_endpoints WHERE client_code LIKE 'cli-%' ORDER BY client_code`,
    )
    assert.deepEqual(
      rows.map((r) => [r.client_code, r.secret_ciphertext.split('.')[1]]),
      [
        ['cli-k1', createKeyRing(K2).current.id],
        ['cli-lost', createKeyRing(LOST).current.id],
      ],
    )
    const again = await cli(['secrets', 'rewrap', '--json'])
    assert.deepEqual([again.code, JSON.parse(again.stdout), again.stderr], [0, { rewrapped: 0, undecryptable: 1 }, ''])
  })

  test('without the operator token: usage error, exit 2', async () => {
    const res = await run(process.execPath, ['--import', 'tsx', 'src/cli/inbound.ts', 'secrets', 'rewrap'], {
      env: { ...process.env, INBOUND_URL: url, ADMIN_TOKEN: '', INBOUND_ADMIN_TOKEN: '' },
    }).catch((err: { code: number; stderr: string }) => err)
    assert.equal((res as { code: number }).code, 2)
    assert.match((res as { stderr: string }).stderr, /^usage: no operator token/)
  })
})
