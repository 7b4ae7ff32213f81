import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import net from 'node:net'
import os from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { fetch } from 'undici'
import { loggedUrl } from '../../../src/http/server.ts'
import { ADMIN_TOKEN } from '../../helpers/app.ts'
import { http, seedTenant, startService } from '../../helpers/service-process.ts'
import { createTestDatabase, onPostgres } from '../../helpers/store.ts'

/**
 * Issue 20, item 4: the hosted page's token is its only credential, so it never reaches a log line. Read from the
 * JSON lines a real service process (src/main.ts, its pino logger at info) wrote for real page requests.
 */

test('loggedUrl: everything under /pay/ but the stylesheet is /pay/[redacted], however the path is spelled', () => {
  const token = 'hT2lS0c4y8m0bQm1m5f7WJ3Qh0bZ8KcXk3s9d2YVn6E'
  for (const url of [
    `/pay/${token}`,
    `/pay/${token}?outcome=confirmed`,
    `/pay/${token}/extra`,
    `/%70ay/${token}`,
    `/PAY/${token}`,
    '/pay/short',
    '/pay/%E0%A4%A',
    `http://host.example/pay/${token}`,
    `HTTPS://host.example:8443/pay/${token}?a=b`,
    `http://host.example/%70ay/${token}`,
    `http://host.example/pay/assets/page.css?${token}`,
    `//pay/${token}`,
    `/pay/${token};x`,
    `/pay/${token}#f`,
    '/pay',
  ]) {
    assert.equal(loggedUrl(url), '/pay/[redacted]', url)
  }
  assert.equal(loggedUrl('/pay/assets/page.css'), '/pay/assets/page.css')
  assert.equal(loggedUrl('/v1/clients/demo/customers/c-1'), '/v1/clients/demo/customers/c-1')
  assert.equal(loggedUrl('/payments'), '/payments')
  assert.equal(loggedUrl('http://host.example/v1/clients/demo'), 'http://host.example/v1/clients/demo')
})

test('a page GET, its form POST, a failing page and /metrics log no token: the request line says /pay/[redacted]', {
  timeout: 240_000,
}, async () => {
  const db = onPostgres ? await createTestDatabase() : null
  const dir = mkdtempSync(join(os.tmpdir(), 'irs-page-log-'))
  const service = await startService({ LOG_LEVEL: 'info', ...(db?.url ? { DATABASE_URL: db.url } : { DATA_DIR: dir }) })
  try {
    const client = 'pagelog'
    const key = await seedTenant(service.url, client, [
      'customers:write',
      'receivables:write',
      'receivables:read',
      'recovery_instructions:write',
      'payment_requests:write',
      'payment_requests:read',
    ])
    const api = (method: string, path: string, body?: unknown) =>
      http(service.url, method, `/v1/clients/${client}${path}`, { token: key, ...(body ? { body } : {}) })
    const ok = (res: { status: number; json?: unknown }, what: string) => {
      assert.ok(res.status < 300, `${what}: ${res.status} ${JSON.stringify(res.json)}`)
      return res
    }
    ok(
      await http(service.url, 'PUT', `/admin/v1/clients/${client}`, { token: ADMIN_TOKEN, body: { collectionEnabled: true } }),
      'collection',
    )
    ok(
      await api('PUT', '/customers/c-1', { type: 'person', name: { firstName: 'Pat', lastName: 'Payer' }, sourceReference: 'c/1' }),
      'customer',
    )
    ok(
      await api('PUT', '/receivables/r-1', {
        financialType: 'loan_balance',
        sourceRevision: 1,
        recoverableAmount: { amount: '100.00', currency: 'USD' },
        creditUnion: { loanAccountReference: 'loan/1', loanType: 'auto' },
        dueDate: '2026-01-01',
        responsibleCustomers: [{ externalCustomerId: 'c-1', role: 'primary' }],
        sourceReference: 'r/1',
      }),
      'receivable',
    )
    ok(
      await api('PUT', '/recovery-instructions/ins-1', {
        scope: { type: 'receivable', externalReceivableId: 'r-1' },
        state: 'authorized',
        revision: 1,
        effectiveAt: '2026-01-01T00:00:00Z',
      }),
      'instruction',
    )
    const created = ok(
      await api('PUT', '/payment-requests/pr-1', { externalReceivableId: 'r-1', amount: { amount: '10.00', currency: 'USD' } }),
      'payment request',
    )
    const token = String((created.json as { hostedUrl: string }).hostedUrl).split('/pay/')[1] as string
    assert.match(token, /^[A-Za-z0-9_-]{43}$/)

    const page = await fetch(`${service.url}/pay/${token}`)
    assert.equal(page.status, 200)
    assert.match(await page.text(), /<form method="post"/)
    const paid = await fetch(`${service.url}/pay/${token}`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: 'outcome=confirmed',
      redirect: 'manual',
    })
    assert.equal(paid.status, 303)
    await paid.text()
    // A submission the page refuses (not its form), the token in a query, and the path spelled otherwise.
    for (const [path, status] of [
      [`/pay/${token}?via=${token}`, 200],
      [`/%70ay/${token}`, 200],
    ] as const) {
      const res = await fetch(`${service.url}${path}`)
      assert.equal(res.status, status, path)
      await res.text()
    }
    // Issue 33 item 4: the request target in absolute form (RFC 9112 3.2.2), which the router serves as the page.
    const { port } = new URL(service.url)
    for (const target of [`http://127.0.0.1:${port}/pay/${token}`, `HTTP://example.com/%70ay/${token}?via=x`]) {
      const head = await rawGet(Number(port), target)
      assert.equal(head, 'HTTP/1.1 200 OK', target)
    }
    const refused = await fetch(`${service.url}/pay/${token}`, { method: 'POST', headers: { 'content-type': 'text/plain' }, body: 'x' })
    assert.equal(refused.status, 415)
    await refused.text()
    const metrics = await fetch(`${service.url}/metrics`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
    assert.equal(metrics.status, 200)
    const exposition = await metrics.text()
    assert.ok(exposition.includes('route="/pay/:token"'), 'the page is labelled by its route template')
    assert.ok(!exposition.includes(token), 'no metric label holds the token')

    // The request lines reach this process through a pipe: wait (bounded) for the last one (the 415's).
    const pageLines = () =>
      service
        .output()
        .split('\n')
        .filter((l) => l.startsWith('{') && l.includes('"url":"/pay/'))
    for (let i = 0; i < 200 && pageLines().filter((l) => l.includes('"statusCode":415')).length === 0; i++) {
      await new Promise((r) => setTimeout(r, 25))
    }
    const out = service.output()
    assert.ok(
      !out.includes(token),
      `the token is in the logs:\n${out
        .split('\n')
        .filter((l) => l.includes(token))
        .join('\n')}`,
    )
    // Every page request (7) logged "incoming request" with its URL redacted, and its completion.
    const incoming = pageLines()
      .map((l) => JSON.parse(l))
      .filter((l) => l.msg === 'incoming request')
    assert.deepEqual(
      incoming.map((l) => [l.req.method, l.req.url]),
      [
        ['GET', '/pay/[redacted]'],
        ['POST', '/pay/[redacted]'],
        ['GET', '/pay/[redacted]'],
        ['GET', '/pay/[redacted]'],
        ['GET', '/pay/[redacted]'],
        ['GET', '/pay/[redacted]'],
        ['POST', '/pay/[redacted]'],
      ],
    )
  } finally {
    await service.kill('SIGTERM')
    rmSync(dir, { recursive: true, force: true })
    await db?.drop()
  }
})

/** One GET of `target` as written (an absolute-form target, which fetch never sends) on a fresh connection: its status line. */
async function rawGet(port: number, target: string): Promise<string> {
  const socket = net.connect(port, '127.0.0.1')
  socket.write(`GET ${target} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nConnection: close\r\n\r\n`)
  let out = ''
  socket.on('data', (d) => {
    out += d.toString()
  })
  await new Promise<void>((resolve, reject) => {
    socket.on('end', () => resolve())
    socket.on('error', reject)
  })
  return out.split('\r\n')[0] ?? ''
}
