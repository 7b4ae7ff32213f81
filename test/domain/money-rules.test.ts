import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import fc from 'fast-check'
import { paymentRequestExpired, workingAmountMinor } from '../../src/domain/money-rules.ts'
import { createTestDatabase, engineName, type TestDatabase } from '../helpers/store.ts'

/**
 * The working amount and the expiry of a Payment request are defined once in TypeScript (src/domain/money-rules.ts)
 * and once in SQL (src/store/migrations/definitions/01_money_rules.sql). These properties keep the two equal on the
 * migrated schema of each engine, boundaries included, so a change made to one side alone fails here.
 */
let db: TestDatabase
before(async () => {
  db = await createTestDatabase()
})
after(() => db.drop())

/** Up to the largest amount the API accepts (15 integer digits, 2 fractional), as minor units. */
const minor = fc.oneof(fc.bigInt({ min: 0n, max: 10n ** 17n - 1n }), fc.bigInt({ min: 0n, max: 1000n }))

test(`working_amount_minor agrees with workingAmountMinor (${engineName})`, async () => {
  const pairs = fc.array(
    fc.oneof(
      fc.tuple(minor, minor),
      minor.map((m) => [m, m] as [bigint, bigint]),
      fc.tuple(minor, fc.constantFrom(-1n, 1n)).map(([m, d]) => [m, m + d < 0n ? 0n : m + d] as [bigint, bigint]),
    ),
    { minLength: 1, maxLength: 40 },
  )
  await fc.assert(
    fc.asyncProperty(pairs, async (list) => {
      const rows = await db.store.query<{ working: string }>(
        `SELECT working_amount_minor(s, c)::text AS working FROM unnest($1::bigint[], $2::bigint[]) WITH ORDINALITY AS t(s, c, n) ORDER BY n`,
        [list.map(([s]) => s.toString()), list.map(([, c]) => c.toString())],
      )
      assert.deepEqual(
        rows.map((r) => BigInt(r.working)),
        list.map(([s, c]) => workingAmountMinor({ sourceAmountMinor: s, confirmedUnreconciledMinor: c })),
      )
    }),
    { numRuns: 60 },
  )
})

test(`payment_request_expired agrees with paymentRequestExpired (${engineName})`, async () => {
  const instant = fc.integer({ min: Date.UTC(2000, 0, 1), max: Date.UTC(2100, 0, 1) })
  const cases = fc.array(
    fc.oneof(
      fc.tuple(instant, instant),
      // The boundary: the very instant, and a millisecond either side.
      fc.tuple(instant, fc.constantFrom(-1, 0, 1)).map(([at, d]) => [at, at + d] as [number, number]),
    ),
    { minLength: 1, maxLength: 40 },
  )
  await fc.assert(
    fc.asyncProperty(cases, async (list) => {
      const iso = (ms: number) => new Date(ms).toISOString()
      const rows = await db.store.query<{ expired: boolean }>(
        `SELECT payment_request_expired(e, n) AS expired
           FROM unnest($1::timestamptz[], $2::timestamptz[]) WITH ORDINALITY AS t(e, n, i) ORDER BY i`,
        [list.map(([e]) => iso(e)), list.map(([, n]) => iso(n))],
      )
      assert.deepEqual(
        rows.map((r) => r.expired),
        list.map(([e, n]) => paymentRequestExpired(iso(e), n)),
      )
    }),
    { numRuns: 60 },
  )
})

test('the boundaries, spelled out', () => {
  assert.equal(workingAmountMinor({ sourceAmountMinor: 500n, confirmedUnreconciledMinor: 200n }), 300n)
  assert.equal(workingAmountMinor({ sourceAmountMinor: 200n, confirmedUnreconciledMinor: 200n }), 0n)
  assert.equal(workingAmountMinor({ sourceAmountMinor: 100n, confirmedUnreconciledMinor: 200n }), 0n)
  const at = '2026-02-18T09:00:00.412Z'
  assert.equal(paymentRequestExpired(at, Date.parse(at) - 1), false)
  assert.equal(paymentRequestExpired(at, Date.parse(at)), true)
})
