import { z } from 'zod'

/**
 * Identifiers and source references must be opaque: never a contact detail, a card, bank account, member,
 * loan or national identification number. The rules (docs/decisions.md, "Sensitive identifiers"):
 * - e-mail address                          (source references; ExternalIds cannot hold '@')
 * - international phone number  +4420...    (source references)
 * - payment card number: 13-19 digits, optionally grouped by spaces or dashes, passing the Luhn check
 * - IBAN: country code, check digits and BBAN passing the ISO 7064 mod-97 check
 * - US SSN shape 123-45-6789, UK National Insurance number shape AB123456C
 * - any run of 9 or more consecutive digits: the shape of national ids (SSN, SIN), phone numbers and
 *   member, loan and account numbers. Opaque identifiers from a Source rarely need nine digits in a row;
 *   a caller who has them can prefix or hash them.
 */
export type SensitiveKind = 'email_address' | 'phone_number' | 'card_number' | 'iban' | 'national_id' | 'long_digit_run'

const EMAIL = /[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+/
const INTL_PHONE = /\+\d[\d ().-]{6,}\d/
const CARD_CANDIDATE = /(?<!\d)\d(?:[ -]?\d){12,18}(?!\d)/g
const IBAN_CANDIDATE = /(?<![A-Za-z0-9])[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}(?![A-Za-z0-9])/g
const SSN = /(?<!\d)\d{3}-\d{2}-\d{4}(?!\d)/
const NINO = /(?<![A-Za-z0-9])[A-CEGHJ-PR-TW-Z][A-CEGHJ-NPR-TW-Z]\d{6}[A-D](?![A-Za-z0-9])/i
const LONG_DIGITS = /\d{9,}/

export function luhnValid(digits: string): boolean {
  let sum = 0
  for (let i = 0; i < digits.length; i++) {
    let d = digits.charCodeAt(digits.length - 1 - i) - 48
    if (i % 2 === 1) {
      d *= 2
      if (d > 9) d -= 9
    }
    sum += d
  }
  return digits.length > 0 && sum % 10 === 0
}

export function ibanValid(candidate: string): boolean {
  const s = candidate.replace(/ /g, '').toUpperCase()
  if (!/^[A-Z]{2}\d{2}[A-Z0-9]{11,30}$/.test(s)) return false
  const rearranged = s.slice(4) + s.slice(0, 4)
  let rem = 0
  for (const ch of rearranged) {
    const v = ch >= 'A' ? String(ch.charCodeAt(0) - 55) : ch
    for (const digit of v) rem = (rem * 10 + (digit.charCodeAt(0) - 48)) % 97
  }
  return rem === 1
}

export function detectSensitive(text: string): SensitiveKind | null {
  if (EMAIL.test(text)) return 'email_address'
  for (const m of text.matchAll(CARD_CANDIDATE)) {
    if (luhnValid(m[0].replace(/[ -]/g, ''))) return 'card_number'
  }
  for (const m of text.toUpperCase().matchAll(IBAN_CANDIDATE)) {
    if (ibanValid(m[0])) return 'iban'
  }
  if (SSN.test(text) || NINO.test(text)) return 'national_id'
  if (INTL_PHONE.test(text)) return 'phone_number'
  if (LONG_DIGITS.test(text)) return 'long_digit_run'
  return null
}

const sensitiveDetail: Record<SensitiveKind, string> = {
  email_address: 'looks like an e-mail address',
  phone_number: 'looks like a phone number',
  card_number: 'looks like a payment card number',
  iban: 'looks like an IBAN',
  national_id: 'looks like a national identification number',
  long_digit_run: 'contains 9 or more consecutive digits, the shape of an account, member, phone or national id number',
}

export const EXTERNAL_ID_PATTERN = /^[A-Za-z0-9_-]{1,128}$/

/**
 * ExternalId: caller-assigned, opaque, case-sensitive. The pattern check and the sensitive check each add
 * their own issue, so an integrator sees the precise reason.
 */
export const ExternalId = z
  .string()
  .regex(EXTERNAL_ID_PATTERN, 'must be 1 to 128 characters of A-Z, a-z, 0-9, _ and -')
  .superRefine((value, ctx) => {
    if (!EXTERNAL_ID_PATTERN.test(value)) return
    const kind = detectSensitive(value)
    if (kind) {
      ctx.addIssue({
        code: 'custom',
        message: `must be opaque: it ${sensitiveDetail[kind]}`,
        params: { fieldCode: 'sensitive_external_id' },
      })
    }
  })
  .meta({
    id: 'ExternalId',
    description:
      'Caller-assigned opaque identifier, ^[A-Za-z0-9_-]{1,128}$, case-sensitive. Never a member, loan or account number or a contact detail.',
    examples: ['cust-0001'],
  })

/** A required string of 1 to 200 characters. */
export const Text200 = z.string().min(1).max(200)

export const SourceReference = z
  .string()
  .min(1)
  .max(200)
  .superRefine((value, ctx) => {
    const kind = detectSensitive(value)
    if (kind) {
      ctx.addIssue({
        code: 'custom',
        message: `must be an opaque pointer into the Source: it ${sensitiveDetail[kind]}`,
        params: { fieldCode: 'sensitive_source_reference' },
      })
    }
  })
  .meta({
    id: 'SourceReference',
    description: 'Opaque pointer into the Source, 1 to 200 characters; never personal or account data.',
    examples: ['ledger/customers/A-17'],
  })
