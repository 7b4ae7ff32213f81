import { type BrandingFields, telOf } from '../../domain/branding.ts'

/**
 * Formatting helpers of the hosted payment page (page.ts): amounts in the client's locale, and the support contact
 * of its branding. Pure functions; page.ts escapes what they return before it reaches HTML.
 */

/** The locale amounts are written in when the client's branding names none. */
export const DEFAULT_PAGE_LOCALE = 'en-US'

/** Formatters by locale, currency and digits: building one costs far more than formatting with it. */
const formatters = new Map<string, Intl.NumberFormat>()

/**
 * "$1,234.50" (en-US), "1 234,50 $ US" (fr-CA): the amount in the locale's currency format, with exactly the
 * digits the amount has (the currency's minor units, so a cent is never rounded away). The decimal string is
 * formatted as it is, not through a float, so no amount is off by a rounding.
 */
export function formatAmount(money: { amount: string; currency: string }, locale: string = DEFAULT_PAGE_LOCALE): string {
  const digits = money.amount.split('.')[1]?.length ?? 0
  const key = `${locale}|${money.currency}|${digits}`
  let format = formatters.get(key)
  if (!format) {
    format = new Intl.NumberFormat(locale, {
      style: 'currency',
      currency: money.currency,
      minimumFractionDigits: digits,
      maximumFractionDigits: digits,
    })
    // Bounded: locales and currencies are few, but nothing here may grow without limit.
    if (formatters.size >= 1000) formatters.clear()
    formatters.set(key, format)
  }
  // Intl formats a decimal string exactly (ECMA-402 "Intl.NumberFormat v3"; this target's lib types lag behind it).
  return (format.format as unknown as (value: string) => string)(money.amount)
}

/** One line of the support contact: its label, the text shown, and where the link goes. */
export interface ContactLine {
  label: string
  text: string
  href: string
}

/** The support contact the branding gives (email, phone, web page), in that order; empty when it gives none. */
export function contactLines(branding: BrandingFields): ContactLine[] {
  const lines: ContactLine[] = []
  if (branding.supportEmail) lines.push({ label: 'Email', text: branding.supportEmail, href: `mailto:${branding.supportEmail}` })
  if (branding.supportPhone) lines.push({ label: 'Phone', text: branding.supportPhone, href: `tel:${telOf(branding.supportPhone)}` })
  if (branding.supportUrl) lines.push({ label: 'Web', text: branding.supportUrl.replace(/^https:\/\//, ''), href: branding.supportUrl })
  return lines
}
