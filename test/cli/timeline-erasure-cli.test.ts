import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import type net from 'node:net'
import { after, before, describe, test } from 'node:test'
import { promisify } from 'node:util'
import { ADMIN_TOKEN, startTestApp, type TestApp } from '../helpers/app.ts'
import { payableReceivable } from '../helpers/payments.ts'
import { engineName } from '../helpers/store.ts'

/**
 * `inbound receivable timeline` and `inbound customer erase` (issue 35 items 3 and 4), run as a child process against
 * the real app on a loopback port.
 */
const run = promisify(execFile)
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

before(async () => {
  t = await startTestApp()
  const k = await t.tenant('tlc')
  await payableReceivable(t, k, 'tlc-r')
  await t.app.app.listen({ host: '127.0.0.1', port: 0 })
  url = `http://127.0.0.1:${(t.app.app.server.address() as net.AddressInfo).port}`
})
after(() => t.close())

describe(`inbound receivable timeline (${engineName})`, () => {
  test('prints the entries oldest first with their actor, a page at a time, and the JSON with --json', async () => {
    const page = await cli(['receivable', 'timeline', 'tlc', 'tlc-r', '--limit', '2'])
    assert.equal(page.code, 0, page.stderr)
    const lines = page.stdout.trimEnd().split('\n')
    assert.match(lines[0] ?? '', /^at +kind +actor +summary$/)
    assert.match(lines[1] ?? '', /^\d{4}-\d\d-\d\dT[\d:.]+Z +revision +integration: Unnamed key +Revision 1: created$/)
    assert.match(lines[2] ?? '', / +revision +integration: Unnamed key +Revision 2: updated$/)
    assert.match(lines[3] ?? '', /^more: --cursor [A-Za-z0-9_-]+$/)
    const every = await cli(['receivable', 'timeline', 'tlc', 'tlc-r', '--all', '--json'])
    assert.equal(every.code, 0, every.stderr)
    const api = await t.admin('GET', '/admin/v1/clients/tlc/receivables/tlc-r/timeline?limit=200')
    assert.deepEqual(JSON.parse(every.stdout), api.json)
    assert.ok(api.json.data.length >= 3)
  })

  test('an unknown Receivable: exit 1 with the problem; a missing argument: exit 2', async () => {
    const missing = await cli(['receivable', 'timeline', 'tlc', 'nope'])
    assert.equal(missing.code, 1)
    assert.match(missing.stderr, /^error: Receivable not found \(404\): No Receivable nope for this client\.$/m)
    const usage = await cli(['receivable', 'timeline', 'tlc'])
    assert.equal(usage.code, 2)
  })

  test('customer erase: recorded (pending), then its state; an unknown Customer exits 1', async () => {
    const first = await cli(['customer', 'erase', 'tlc', 'pay-cust', '--json'])
    assert.equal(first.code, 0, first.stderr)
    const erasure = JSON.parse(first.stdout)
    assert.deepEqual(erasure, { externalCustomerId: 'pay-cust', status: 'pending', requestedAt: erasure.requestedAt, erasedAt: null })
    await t.app.erasureWorkers.worker.runOnce()
    const again = await cli(['customer', 'erase', 'tlc', 'pay-cust'])
    assert.equal(again.code, 0, again.stderr)
    assert.match(again.stdout, /^status +done$/m)
    const missing = await cli(['customer', 'erase', 'tlc', 'nobody'])
    assert.equal(missing.code, 1)
    assert.match(missing.stderr, /^error: Customer not found \(404\)/m)
  })
})
