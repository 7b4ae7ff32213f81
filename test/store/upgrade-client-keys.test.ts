import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { after, before, test } from 'node:test'
import { migrate } from '../../src/store/migrate.ts'
import { startTestApp, type TestApp } from '../helpers/app.ts'
import { engineName, loadDumpDatabase, type TestDatabase } from '../helpers/store.ts'

/**
 * Migration 0043 (every unique key of a client-keyed table includes client_code; docs/scaling.md) on a database
 * written by main at 20eeacf (test/fixtures/upgrade-from-20eeacf.sql): the operator's events (no client) move to
 * operator_audit_events under their sequence numbers, the client's stay, the audit listing reads the same events in
 * the same order; every Payment request's token is in page_tokens, so its hosted page still opens.
 */
const dump = readFileSync(new URL('../fixtures/upgrade-from-20eeacf.sql', import.meta.url), 'utf8')

interface AuditRow {
  seq: string
  audit_event_id: string
  client_code: string | null
  action: string
}

let db: TestDatabase
let t: TestApp
let audit: AuditRow[]
let tokens: { client_code: string; id: string; page_token: string }[]

before(async () => {
  db = await loadDumpDatabase(dump)
  audit = await db.store.query<AuditRow>('SELECT seq::text AS seq, audit_event_id, client_code, action FROM audit_events a ORDER BY a.seq')
  tokens = await db.store.query(
    'SELECT client_code, external_payment_request_id AS id, page_token FROM payment_requests ORDER BY page_token COLLATE "C"',
  )
  await migrate(db.store)
  t = await startTestApp({}, { db })
})
after(async () => {
  await t?.close()
  await db?.drop()
})

test(`the operator's events move to their own table under their numbers; the listing is unchanged (${engineName})`, async () => {
  const operators = audit.filter((a) => a.client_code === null)
  const clients = audit.filter((a) => a.client_code !== null)
  assert.ok(operators.length > 0 && clients.length > 0, `${operators.length} operator and ${clients.length} client events in the dump`)
  assert.deepEqual(
    await db.store.query(
      'SELECT seq::text AS seq, audit_event_id, NULL::text AS client_code, action FROM operator_audit_events o ORDER BY o.seq',
    ),
    operators,
  )
  assert.deepEqual(
    await db.store.query('SELECT seq::text AS seq, audit_event_id, client_code, action FROM audit_events a ORDER BY a.seq'),
    clients,
  )
  const listed = await t.admin('GET', '/admin/v1/audit-events?limit=200')
  assert.equal(listed.status, 200, listed.body)
  assert.deepEqual(
    listed.json.data.map((e: { auditEventId: string; clientCode: string | null }) => [e.auditEventId, e.clientCode]),
    audit.map((a) => [a.audit_event_id, a.client_code]),
  )
  // Paged two at a time, the same events in the same order.
  const paged: string[] = []
  for (let cursor: string | null = null; ; ) {
    const page = await t.admin('GET', `/admin/v1/audit-events?limit=2${cursor ? `&cursor=${cursor}` : ''}`)
    assert.equal(page.status, 200, page.body)
    paged.push(...page.json.data.map((e: { auditEventId: string }) => e.auditEventId))
    cursor = page.json.nextCursor
    if (!cursor) break
  }
  assert.deepEqual(
    paged,
    audit.map((a) => a.audit_event_id),
  )
  // A new event of either kind takes the next number of the one sequence.
  assert.equal((await t.admin('PUT', '/admin/v1/integrations/int-after', { name: 'After' })).status, 201)
  const [next] = await db.store.query<{ seq: string }>(`SELECT seq::text AS seq FROM operator_audit_events WHERE target_id = 'int-after'`)
  assert.ok(BigInt(next?.seq ?? 0) > BigInt(audit.at(-1)?.seq ?? 0))
  const nulls = await db.store.query<{ n: number }>('SELECT count(*)::int AS n FROM audit_events WHERE client_code IS NULL')
  assert.deepEqual(nulls, [{ n: 0 }])
  await assert.rejects(
    db.store.query(
      `INSERT INTO audit_events (audit_event_id, client_code, actor, action, target_type, target_id, change_digest, occurred_at)
       VALUES (gen_random_uuid(), NULL, 'operator', 'x', 'x', 'x', 'x', now())`,
    ),
    /null value in column "client_code"/,
  )
})

test("every Payment request's token finds its client; the hosted page of one made before the upgrade opens", async () => {
  assert.ok(tokens.length > 0)
  assert.deepEqual(
    await db.store.query(
      'SELECT client_code, external_payment_request_id AS id, page_token FROM page_tokens ORDER BY page_token COLLATE "C"',
    ),
    tokens,
  )
  const page = await t.call('GET', `/pay/${tokens[0]?.page_token}`)
  assert.equal(page.status, 200, page.body)
  const unknown = await t.call('GET', `/pay/${'A'.repeat(43)}`)
  assert.equal(unknown.status, 404)
})
