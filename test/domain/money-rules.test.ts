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

type Triple = [bigint, bigint, bigint]

test(`working_amount_minor agrees with workingAmountMinor (${engineName})`, async () => {
  // Source, confirmed-unreconciled, acknowledged-undeclared: arbitrary, and around the boundary where the two
  // deductions together meet the source amount (a cent either side).
  const triples = fc.array(
    fc.oneof(
      fc.tuple(minor, minor, minor),
      fc
        .tuple(minor, minor, fc.constantFrom(-1n, 0n, 1n))
        .map(([s, c, d]) => (c <= s ? [s, c, s - c + d < 0n ? 0n : s - c + d] : [s, s, 0n]) as Triple),
      minor.map((m) => [m, 0n, m] as Triple),
    ),
    { minLength: 1, maxLength: 40 },
  )
  await fc.assert(
    fc.asyncProperty(triples, async (list) => {
      const rows = await db.store.query<{ working: string }>(
        `SELECT working_amount_minor(s, c, a)::text AS working
           FROM unnest($1::bigint[], $2::bigint[], $3::bigint[]) WITH ORDINALITY AS t(s, c, a, n) ORDER BY n`,
        [list.map(([s]) => s.toString()), list.map(([, c]) => c.toString()), list.map(([, , a]) => a.toString())],
      )
      assert.deepEqual(
        rows.map((r) => BigInt(r.working)),
        list.map(([s, c, a]) =>
          workingAmountMinor({ sourceAmountMinor: s, confirmedUnreconciledMinor: c, acknowledgedUndeclaredMinor: a }),
        ),
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
  const w = (s: bigint, c: bigint, a: bigint) =>
    workingAmountMinor({ sourceAmountMinor: s, confirmedUnreconciledMinor: c, acknowledgedUndeclaredMinor: a })
  assert.equal(w(500n, 200n, 0n), 300n)
  assert.equal(w(200n, 200n, 0n), 0n)
  assert.equal(w(100n, 200n, 0n), 0n)
  // Reconciling moves money from confirmed-unreconciled to acknowledged-undeclared: the working amount stays.
  assert.equal(w(10000n, 6000n, 0n), 4000n)
  assert.equal(w(10000n, 0n, 6000n), 4000n)
  assert.equal(w(10000n, 3500n, 2500n), 4000n)
  assert.equal(w(10000n, 3500n, 6500n), 0n)
  assert.equal(w(10000n, 3500n, 6501n), 0n)
  assert.equal(w(9000n, 0n, 6000n), 3000n)
  const at = '2026-02-18T09:00:00.412Z'
  assert.equal(paymentRequestExpired(at, Date.parse(at) - 1), false)
  assert.equal(paymentRequestExpired(at, Date.parse(at)), true)
})
