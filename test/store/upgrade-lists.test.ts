import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { after, before, test } from 'node:test'
import type { Clock } from '../../src/domain/time.ts'
import { migrate } from '../../src/store/migrate.ts'
import { startTestApp, type TestApp } from '../helpers/app.ts'
import { engineName, loadDumpDatabase, type TestDatabase } from '../helpers/store.ts'

/**
 * Migration 0026 (the lists) on a database written by main at 20eeacf (test/fixtures/upgrade-from-20eeacf.sql):
 * an existing recovery instruction takes the time its first revision was recorded as its creation time, so one
 * revised since (its recorded_at moved) keeps its place in the newest-first list; the Payment requests of the dump
 * list newest first through the new indexes.
 */
const dump = readFileSync(new URL('../fixtures/upgrade-from-20eeacf.sql', import.meta.url), 'utf8')
const clock: Clock = { now: () => new Date('2026-11-20T13:00:00.000Z') }
const CLIENT = 'upgrade'

/** An empty database of the engine under test, loaded with the dump (not migrated). */
const loadDump = () => loadDumpDatabase(dump)

let db: TestDatabase
let t: TestApp
let apiKey: string

before(async () => {
  db = await loadDump()
  // The oldest instruction revised before the upgrade: revision 2 recorded last of all.
  await db.store.query(
    `UPDATE recovery_instructions SET state = 'withdrawn', revision = 2, recorded_at = '2026-11-20 12:05:00+00'
      WHERE client_code = $1 AND external_instruction_id = 'ins-r-unpaid'`,
    [CLIENT],
  )
  await db.store.query(
    `INSERT INTO recovery_instruction_history VALUES ($1, 'ins-r-unpaid', 2, 'withdrawn', 'source', 'instruction_put', '2026-01-01T00:00:00Z', '2026-11-20 12:05:00+00')`,
    [CLIENT],
  )
  await migrate(db.store)
  t = await startTestApp({}, { clock, db })
  const key = await t.admin('POST', '/admin/v1/integrations/int-upgrade/api-keys', {})
  assert.equal(key.status, 201, key.body)
  apiKey = key.json.apiKey
})
after(async () => {
  await t?.close()
  await db?.drop()
})

test(`existing instructions are listed by their first revision's time, a later revision keeps its place (${engineName})`, async () => {
  const created = await db.store.query<{ id: string; created_at: string }>(
    `SELECT external_instruction_id AS id, created_at FROM recovery_instructions WHERE client_code = $1 AND external_instruction_id = 'ins-r-unpaid'`,
    [CLIENT],
  )
  assert.deepEqual(created, [{ id: 'ins-r-unpaid', created_at: '2026-11-20T12:00:14.000Z' }])
  const res = await t.call('GET', `/v1/clients/${CLIENT}/recovery-instructions?limit=200`, { key: apiKey })
  assert.equal(res.status, 200, res.body)
  assert.deepEqual(
    res.json.data.map((i: { externalInstructionId: string; revision: number; recordedAt: string }) => [
      i.externalInstructionId,
      i.revision,
    ]),
    [
      ['ins-r-open', 1],
      ['ins-r-credit', 1],
      ['ins-r-snapshot', 1],
      ['ins-r-declared-before', 1],
      ['ins-r-redeclared', 1],
      ['ins-r-partial', 1],
      ['ins-r-recon', 1],
      ['ins-r-paid', 1],
      ['ins-r-unpaid', 2],
    ],
  )
  assert.equal(res.json.data.at(-1).recordedAt, '2026-11-20T12:05:00.000Z')
})

test(`the dump's Payment requests list newest first, each as its GET answers it (${engineName})`, async () => {
  const res = await t.call('GET', `/v1/clients/${CLIENT}/payment-requests?limit=200`, { key: apiKey })
  assert.equal(res.status, 200, res.body)
  const ids = res.json.data.map((r: { externalPaymentRequestId: string }) => r.externalPaymentRequestId)
  const stored = await db.store.query<{ id: string }>(
    `SELECT external_payment_request_id AS id FROM payment_requests WHERE client_code = $1 ORDER BY created_at DESC, external_payment_request_id DESC`,
    [CLIENT],
  )
  assert.ok(ids.length > 0)
  assert.deepEqual(
    ids,
    stored.map((r) => r.id),
  )
  for (const item of res.json.data) {
    const one = await t.call('GET', `/v1/clients/${CLIENT}/payment-requests/${item.externalPaymentRequestId}`, { key: apiKey })
    assert.deepEqual(item, one.json)
  }
})
