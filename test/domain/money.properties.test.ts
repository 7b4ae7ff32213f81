import assert from 'node:assert/strict'
import { test } from 'node:test'
import fc from 'fast-check'
import { formatMinor, Money, normalizeAmount, sumMinor, toMinor } from '../../src/domain/money.ts'

test('exact parsing and rendering', () => {
  assert.equal(toMinor('0'), 0n)
  assert.equal(toMinor('1.5'), 150n)
  assert.equal(toMinor('12.34'), 1234n)
  assert.equal(toMinor('999999999999999.99'), 99999999999999999n)
  assert.equal(formatMinor(5n), '0.05')
  assert.equal(formatMinor(100n), '1.00')
  assert.equal(normalizeAmount('7'), '7.00')
  for (const bad of ['', '01', '1.234', '-1', '1e3', '.5', '1.', ' 1', '0x10', '1000000000000000']) assert.throws(() => toMinor(bad), bad)
})

test('Money normalizes, and accepts only two-decimal ISO 4217 currencies', () => {
  assert.deepEqual(Money.parse({ amount: '5', currency: 'USD' }), { amount: '5.00', currency: 'USD' })
  assert.deepEqual(
    Money.safeParse({ amount: '5', currency: 'usd' }).error?.issues.map((i) => i.code),
    ['invalid_format'],
  )
  assert.equal(Money.safeParse({ amount: '5', currency: 'JPY' }).success, false)
  assert.equal(Money.safeParse({ amount: '5', currency: 'ABC' }).success, false)
  assert.equal(Money.safeParse({ amount: '5', currency: 'XAU' }).success, false)
  assert.equal(Money.safeParse({ amount: 5, currency: 'USD' }).success, false)
  assert.equal(Money.safeParse({ amount: '5', currency: 'EUR', extra: 1 }).success, false)
})

const minor = fc.bigInt({ min: 0n, max: 10n ** 17n - 1n })

test('property: rendering and parsing round-trip for every amount', () => {
  fc.assert(
    fc.property(minor, (n) => {
      assert.equal(toMinor(formatMinor(n)), n)
      assert.equal(formatMinor(toMinor(formatMinor(n))), formatMinor(n))
    }),
  )
})

test('property: sums in minor units never drift, in any order', () => {
  const amounts = fc.array(fc.bigInt({ min: 0n, max: 10n ** 12n }), { maxLength: 50 })
  fc.assert(
    fc.property(amounts, (ns) => {
      const money = ns.map((n) => ({ amount: formatMinor(n), currency: 'USD' }))
      const expected = ns.reduce((a, b) => a + b, 0n)
      assert.equal(sumMinor(money), expected)
      assert.equal(sumMinor([...money].reverse()), expected)
      // The float approach this replaces would drift: 0.1 + 0.2 !== 0.3; minor units do not.
      assert.equal(
        sumMinor([
          { amount: '0.10', currency: 'USD' },
          { amount: '0.20', currency: 'USD' },
        ]),
        toMinor('0.30'),
      )
    }),
  )
})
