import currencyCodes from 'currency-codes'
import { z } from 'zod'

/**
 * Money is exact: amounts travel as decimal strings, are held as integer minor units (bigint) and are
 * rendered with exactly two fractional digits. No binary floating point touches an amount.
 *
 * The wire format fixes two fractional digits, so the accepted currencies are the ISO 4217 codes whose
 * minor unit is 2 (USD, EUR, GBP, CAD, AUD, ...). A zero- or three-decimal currency (JPY, KWD) cannot be
 * written exactly in that format and is refused rather than silently rescaled.
 */
export const CURRENCIES: readonly string[] = currencyCodes.data
  .filter((c) => c.digits === 2 && !c.code.startsWith('X'))
  .map((c) => c.code)
  .sort()
const currencySet = new Set(CURRENCIES)

/** At most 15 integer digits: ~10^15 in major units, far inside bigint and Postgres bigint in minor units. */
const AMOUNT = /^(0|[1-9]\d{0,14})(\.\d{1,2})?$/

export function toMinor(amount: string): bigint {
  const m = AMOUNT.exec(amount)
  if (!m) throw new Error(`not an amount: ${amount}`)
  const [whole, frac = ''] = amount.split('.') as [string, string?]
  return BigInt(whole) * 100n + BigInt((frac ?? '').padEnd(2, '0') || '0')
}

export function formatMinor(minor: bigint): string {
  const negative = minor < 0n
  const abs = negative ? -minor : minor
  const text = `${abs / 100n}.${(abs % 100n).toString().padStart(2, '0')}`
  return negative ? `-${text}` : text
}

/** "225.00 USD": an amount as the request writes it, for problem details (never minor units). */
export function describeMoney(minor: bigint, currency: string): string {
  return `${formatMinor(minor)} ${currency}`
}

export function normalizeAmount(amount: string): string {
  return formatMinor(toMinor(amount))
}

export const Currency = z
  .string()
  .regex(/^[A-Z]{3}$/, { message: 'must be an ISO 4217 code such as USD', abort: true })
  .refine((c) => currencySet.has(c), { message: 'must be an ISO 4217 currency with two decimal places', abort: true })
  .meta({ id: 'Currency', description: 'ISO 4217 currency code with a minor unit of two digits.', examples: ['USD'] })

/**
 * Request Money: `{amount, currency}`, amount a non-negative decimal string with at most two decimals.
 * An invalid amount or currency aborts: the refinements of an enclosing schema (sums, one currency per
 * Receivable) never see a Money that toMinor would refuse, so they report nothing misleading and never throw.
 */
export const Money = z
  .strictObject({
    amount: z.string().regex(AMOUNT, {
      message: 'must be a non-negative decimal string with at most two fractional digits, such as "125.50"',
      abort: true,
    }),
    currency: Currency,
  })
  .transform((m) => ({ amount: normalizeAmount(m.amount), currency: m.currency }))
  .meta({
    id: 'Money',
    description: 'Exact amount as a decimal string (rendered with two fractional digits) and an ISO 4217 currency.',
    examples: [{ amount: '125.50', currency: 'USD' }],
  })
export type Money = z.output<typeof Money>

/** Response Money: always two fractional digits. */
export const MoneyOut = z.object({ amount: z.string(), currency: z.string() }).meta({ id: 'MoneyAmount' })

export function money(minor: bigint, currency: string): Money {
  return { amount: formatMinor(minor), currency }
}

export function sumMinor(values: readonly Money[]): bigint {
  return values.reduce((acc, m) => acc + toMinor(m.amount), 0n)
}
