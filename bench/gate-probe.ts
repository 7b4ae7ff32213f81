/**
 * `DATABASE_URL=postgres://… npx tsx bench/gate-probe.ts`: what a GET of one resource costs the store with and
 * without the limits, one connection, in process (no HTTP): the gate before migration 0015 (a slot row, then the
 * read carrying its release), the gate in the read (Gate.enterWithRead), and the two limits-off shapes (the key
 * lookup in the read, as bench/limits-off.ts does; the lookup, then the read). Each variant runs 400 times after
 * 50 warm-up calls, interleaved over 7 rounds with a VACUUM of the limit tables before each; prints the medians.
 * A measurement, not a test: nothing here asserts a time. PostgreSQL only (PGlite's limits are in memory).
 */
import { randomUUID } from 'node:crypto'
import { digestSecret } from '../src/access/keys.ts'
import { systemClock } from '../src/domain/time.ts'
import { createGate } from '../src/http/limits.ts'
import { gatedReadSql } from '../src/store/gate-store.ts'
import { startTestApp } from '../test/helpers/app.ts'
import { createTestDatabase } from '../test/helpers/store.ts'

if (!process.env.DATABASE_URL) throw new Error("set DATABASE_URL: the gate in the store is PostgreSQL's")
const db = await createTestDatabase()
const c = await startTestApp({ SERVICE_ENVIRONMENT: 'production' }, { db })
const k = await c.tenant('probe')
await c.call('PUT', '/v1/clients/probe/customers/c-1', {
  key: k.apiKey,
  body: { type: 'person', name: { firstName: 'A', lastName: 'B' }, sourceReference: 'x' },
})
const gate = createGate(db.store, { perMinute: 1e9, concurrency: 1, clock: systemClock })
const req = { digest: digestSecret(k.apiKey), environment: 'production' as const, clientCode: 'probe' }
const readSql = 'SELECT * FROM customers WHERE client_code = $1 AND external_customer_id = $2'
const read = { sql: readSql, params: ['probe', 'c-1'], scopes: ['customers:read'] }
const lookup = (p: number) =>
  'SELECT k.api_key_id AS key_id, k.integration_id AS key_integration_id, g.status AS grant_status, g.scopes AS grant_scopes, g.ip_allowlist AS grant_ip_allowlist, g.recovery_entry_mode AS grant_recovery_entry_mode, g.feed_mode AS grant_feed_mode, g.industry_profile AS grant_industry_profile, g.receipt_delivery_owner AS grant_receipt_delivery_owner, 0 AS used, true AS admitted ' +
  `FROM api_keys k LEFT JOIN grants g ON g.client_code = $${p + 2} AND g.integration_id = k.integration_id WHERE k.digest = $${p + 1} AND k.revoked_at IS NULL AND k.environment = $${p + 3}`
const w = () => new Date(Date.now() - (Date.now() % 60000)).toISOString()
const variants: Record<string, () => Promise<unknown>> = {
  'before: gate row, then read with release': async () => {
    const holder = randomUUID()
    await db.store.query(
      'SELECT * FROM request_gate($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12)',
      [req.digest, 'production', 'probe', false, w(), new Date().toISOString(), 1e9, 1, 30, holder, [], false],
      { prepared: true },
    )
    await db.store.query(
      `WITH _slot_release AS (DELETE FROM inflight_requests WHERE bucket = ANY($3::text[]) AND holder = $4) ${readSql}`,
      ['probe', 'c-1', [`key:${k.apiKeyId}`], holder],
      { prepared: true },
    )
  },
  'after: one statement (gate in the read)': () => (gate.enterWithRead as NonNullable<typeof gate.enterWithRead>)(req, read),
  'limits off: one statement (lookup in the read)': () =>
    db.store.query(gatedReadSql(lookup(2), readSql, 6), ['probe', 'c-1', req.digest, 'probe', 'production', ['customers:read']], {
      prepared: true,
    }),
  'limits off: lookup, then read': async () => {
    await db.store.query(
      'SELECT k.api_key_id FROM api_keys k LEFT JOIN grants g ON g.client_code = $2 AND g.integration_id = k.integration_id WHERE k.digest = $1 AND k.revoked_at IS NULL',
      [req.digest, 'probe'],
      { prepared: true },
    )
    await db.store.query(readSql, ['probe', 'c-1'], { prepared: true })
  },
}
const totals: Record<string, number[]> = {}
for (let round = 0; round < 7; round++) {
  for (const [name, fn] of Object.entries(variants)) {
    await db.store.query('VACUUM inflight_requests')
    await db.store.query('VACUUM rate_limit_windows')
    for (let i = 0; i < 50; i++) await fn()
    const t0 = process.hrtime.bigint()
    for (let i = 0; i < 400; i++) await fn()
    const times = totals[name] ?? []
    times.push(Number(process.hrtime.bigint() - t0) / 400 / 1000)
    totals[name] = times
  }
}
for (const [name, xs] of Object.entries(totals))
  console.log(`${name}: median ${xs.sort((a, b) => a - b)[3]?.toFixed(0)} µs (${xs.map((x) => x.toFixed(0)).join(', ')})`)
await c.close()
process.exit(0)
