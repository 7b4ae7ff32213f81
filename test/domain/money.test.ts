import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import fc from 'fast-check'
import { CURRENCIES, Currency, formatMinor, Money, money, normalizeAmount, sumMinor, toMinor } from '../../src/domain/money.ts'

/** Issue codes and paths of a failed parse, in order. */
const issues = (result: { success: boolean; error?: { issues: { code: string; path: PropertyKey[] }[] } }) =>
  (result.error?.issues ?? []).map((i) => [i.code, i.path.join('/')])

const INVALID_AMOUNTS = [
  '',
  ' ',
  '00',
  '01',
  '01.50',
  '1.234',
  '0.001',
  '-1',
  '-0.01',
  '+1',
  '1e3',
  '.5',
  '1.',
  ' 1',
  '1 ',
  '1,00',
  '1_000',
  '0x10',
  'NaN',
  'Infinity',
  '１',
  '1.5\n',
  '1000000000000000', // 16 integer digits: beyond the 15 the wire format allows
  '1000000000000000.00',
]

describe('exact parsing and rendering', () => {
  test('toMinor: decimal strings to integer minor units', () => {
    const cases: [string, bigint][] = [
      ['0', 0n],
      ['0.0', 0n],
      ['0.00', 0n],
      ['0.05', 5n],
      ['0.5', 50n],
      ['1.5', 150n],
      ['1.50', 150n],
      ['12.34', 1234n],
      ['100', 10000n],
      ['84.50', 8450n],
      ['999999999999999', 99999999999999900n],
      ['999999999999999.99', 99999999999999999n],
    ]
    for (const [text, minor] of cases) assert.equal(toMinor(text), minor, text)
  })

  test('formatMinor: always two fractional digits, sign in front', () => {
    const cases: [bigint, string][] = [
      [0n, '0.00'],
      [1n, '0.01'],
      [5n, '0.05'],
      [10n, '0.10'],
      [99n, '0.99'],
      [100n, '1.00'],
      [150n, '1.50'],
      [1234n, '12.34'],
      [99999999999999999n, '999999999999999.99'],
      [-5n, '-0.05'],
      [-150n, '-1.50'],
    ]
    for (const [minor, text] of cases) assert.equal(formatMinor(minor), text, String(minor))
  })

  test('normalizeAmount and money()', () => {
    assert.equal(normalizeAmount('0'), '0.00')
    assert.equal(normalizeAmount('1.5'), '1.50')
    assert.equal(normalizeAmount('7'), '7.00')
    assert.equal(normalizeAmount('12.34'), '12.34')
    assert.equal(normalizeAmount('999999999999999.99'), '999999999999999.99')
    assert.deepEqual(money(1050n, 'EUR'), { amount: '10.50', currency: 'EUR' })
  })

  test('invalid strings throw, in toMinor, normalizeAmount and the Money schema alike', () => {
    for (const bad of INVALID_AMOUNTS) {
      assert.throws(() => toMinor(bad), /not an amount/, JSON.stringify(bad))
      assert.throws(() => normalizeAmount(bad), /not an amount/, JSON.stringify(bad))
      assert.deepEqual(issues(Money.safeParse({ amount: bad, currency: 'USD' })), [['invalid_format', 'amount']], JSON.stringify(bad))
    }
  })
})

describe('the Money schema', () => {
  test("normalizes '5' to '5.00' and keeps two-decimal amounts as they are", () => {
    assert.deepEqual(Money.parse({ amount: '5', currency: 'USD' }), { amount: '5.00', currency: 'USD' })
    assert.deepEqual(Money.parse({ amount: '5.5', currency: 'EUR' }), { amount: '5.50', currency: 'EUR' })
    assert.deepEqual(Money.parse({ amount: '0', currency: 'GBP' }), { amount: '0.00', currency: 'GBP' })
    assert.deepEqual(Money.parse({ amount: '125.50', currency: 'CAD' }), { amount: '125.50', currency: 'CAD' })
  })

  test('refuses non-string amounts, missing fields and unknown keys', () => {
    assert.deepEqual(issues(Money.safeParse({ amount: 5, currency: 'USD' })), [['invalid_type', 'amount']])
    assert.deepEqual(issues(Money.safeParse({ amount: '5' })), [['invalid_type', 'currency']])
    assert.deepEqual(issues(Money.safeParse({ currency: 'USD' })), [['invalid_type', 'amount']])
    assert.deepEqual(issues(Money.safeParse({ amount: '5', currency: 'USD', scale: 2 })), [['unrecognized_keys', '']])
    assert.deepEqual(issues(Money.safeParse('5.00 USD')), [['invalid_type', '']])
  })

  test("currency rules: USD accepted, 'usd' invalid_format, JPY (zero-decimal), KWD (three-decimal) and ABC refused", () => {
    for (const ok of ['USD', 'EUR', 'GBP', 'CAD', 'AUD', 'CHF']) {
      assert.deepEqual(Currency.parse(ok), ok)
      assert.deepEqual(Money.parse({ amount: '1', currency: ok }), { amount: '1.00', currency: ok })
    }
    assert.deepEqual(issues(Money.safeParse({ amount: '5', currency: 'usd' })), [['invalid_format', 'currency']])
    for (const malformed of ['US', 'USDD', 'U5D', '', ' USD']) {
      assert.deepEqual(issues(Currency.safeParse(malformed)), [['invalid_format', '']], JSON.stringify(malformed))
    }
    // Well-formed codes that are not two-decimal ISO 4217 currencies: refused with one custom issue.
    for (const refused of ['JPY', 'KWD', 'BHD', 'ABC', 'XAU', 'XXX']) {
      assert.deepEqual(issues(Money.safeParse({ amount: '5', currency: refused })), [['custom', 'currency']], refused)
    }
  })

  test('the currency list: sorted ISO 4217 codes of minor unit 2, no X-codes, no zero- or three-decimal currencies', () => {
    assert.ok(CURRENCIES.includes('USD') && CURRENCIES.includes('EUR') && CURRENCIES.includes('GBP'))
    for (const absent of ['JPY', 'KRW', 'KWD', 'BHD', 'XAU', 'XTS', 'ABC']) assert.equal(CURRENCIES.includes(absent), false, absent)
    assert.deepEqual([...CURRENCIES].sort(), CURRENCIES)
    assert.equal(new Set(CURRENCIES).size, CURRENCIES.length)
    for (const c of CURRENCIES) assert.match(c, /^[A-WYZ][A-Z]{2}$/)
  })
})

/** A normalized amount built from its parts, independently of formatMinor. */
const normalizedAmount = fc
  .tuple(fc.bigInt({ min: 0n, max: 10n ** 15n - 1n }), fc.integer({ min: 0, max: 99 }))
  .map(([whole, cents]) => ({ text: `${whole}.${String(cents).padStart(2, '0')}`, minor: whole * 100n + BigInt(cents) }))

/** Any accepted spelling of an amount ('7', '7.5', '7.50') with the minor units it means. */
const anySpelling = fc
  .tuple(
    fc.bigInt({ min: 0n, max: 10n ** 12n }),
    fc.oneof(fc.integer({ min: 0, max: 99 }), fc.constantFrom(0, 10, 50, 90)),
    fc.constantFrom('full', 'short', 'bare'),
  )
  .map(([whole, cents, form]) => {
    const minor = whole * 100n + BigInt(cents)
    const normalized = `${whole}.${String(cents).padStart(2, '0')}`
    if (form === 'bare' && cents === 0) return { text: `${whole}`, minor, normalized }
    if (form === 'short' && cents % 10 === 0) return { text: `${whole}.${cents / 10}`, minor, normalized }
    return { text: normalized, minor, normalized }
  })

describe('properties', () => {
  test('formatMinor(toMinor(x)) === x for every normalized amount', () => {
    fc.assert(
      fc.property(normalizedAmount, ({ text, minor }) => {
        assert.equal(toMinor(text), minor)
        assert.equal(formatMinor(toMinor(text)), text)
        assert.equal(normalizeAmount(text), text)
      }),
      { numRuns: 2000 },
    )
  })

  test('toMinor(formatMinor(n)) === n for every non-negative n below 10^17', () => {
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: 10n ** 17n - 1n }), (n) => {
        const text = formatMinor(n)
        assert.match(text, /^(0|[1-9]\d{0,14})\.\d{2}$/)
        assert.equal(toMinor(text), n)
      }),
      { numRuns: 2000 },
    )
  })

  test('every accepted spelling parses to the same minor units and Money normalizes it', () => {
    fc.assert(
      fc.property(anySpelling, fc.constantFrom(...CURRENCIES), ({ text, minor, normalized }, currency) => {
        assert.equal(toMinor(text), minor)
        assert.equal(normalizeAmount(text), normalized)
        assert.deepEqual(Money.parse({ amount: text, currency }), { amount: normalized, currency })
      }),
      { numRuns: 1000 },
    )
  })

  test('sums in minor units equal the sum of the parts in any order (no drift)', () => {
    const parts = fc.array(anySpelling, { maxLength: 60 })
    fc.assert(
      fc.property(
        parts.chain((ps) =>
          fc.tuple(
            fc.constant(ps),
            fc.shuffledSubarray(
              ps.map((_, i) => i),
              { minLength: ps.length, maxLength: ps.length },
            ),
          ),
        ),
        ([ps, order]) => {
          const expected = ps.reduce((acc, p) => acc + p.minor, 0n)
          const asMoney = ps.map((p) => ({ amount: p.text, currency: 'USD' }))
          assert.equal(sumMinor(asMoney), expected)
          assert.equal(sumMinor(order.map((i) => asMoney[i] as Money)), expected)
          assert.equal(sumMinor([...asMoney].reverse()), expected)
          // Accumulating through the wire format step by step lands on the same exact total.
          const stepwise = ps.reduce((acc, p) => normalizeAmount(formatMinor(toMinor(acc) + toMinor(p.text))), '0.00')
          assert.equal(stepwise, formatMinor(expected))
        },
      ),
      { numRuns: 500 },
    )
  })

  test('the classic float traps add up exactly', () => {
    const usd = (amount: string) => ({ amount, currency: 'USD' })
    assert.equal(formatMinor(sumMinor([usd('0.1'), usd('0.2')])), '0.30')
    assert.equal(formatMinor(sumMinor(Array.from({ length: 10 }, () => usd('0.10')))), '1.00')
    assert.equal(formatMinor(sumMinor(Array.from({ length: 1000 }, () => usd('0.01')))), '10.00')
    assert.equal(formatMinor(sumMinor([usd('999999999999999.99'), usd('0.01')])), '1000000000000000.00')
    assert.equal(sumMinor([]), 0n)
  })
})
