import { z } from 'zod'
import { refuseUnsafeDisplayText } from './display-text.ts'

/**
 * A client's branding on the hosted payment page (docs/operator-api.md, "Branding"): the name the debtor reads, an
 * accent colour for the Pay button and links, how to reach the credit union, and the locale amounts are written in.
 * Every field is optional; the page falls back to the client's name, the service's blue and `en-US`.
 */

/** WCAG 2.x contrast ratio of two sRGB colours given as `#rrggbb`, from 1 to 21. */
export function contrastRatio(a: string, b: string): number {
  const [la, lb] = [relativeLuminance(a), relativeLuminance(b)]
  return (Math.max(la, lb) + 0.05) / (Math.min(la, lb) + 0.05)
}

function relativeLuminance(hex: string): number {
  const channel = (i: number) => {
    const c = Number.parseInt(hex.slice(1 + 2 * i, 3 + 2 * i), 16) / 255
    return c <= 0.04045 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4
  }
  return 0.2126 * channel(0) + 0.7152 * channel(1) + 0.0722 * channel(2)
}

/**
 * The least contrast an accent colour must have against white (WCAG AA for normal text, 4.5:1): it is the
 * background of the Pay button's white label, and the colour of links on the white card.
 */
export const MIN_ACCENT_CONTRAST = 4.5

export const ACCENT_COLOR = /^#[0-9a-f]{6}$/

/** The canonical form of a BCP 47 tag that Intl formats numbers in (`en-us` -> `en-US`); undefined otherwise. */
export function supportedLocale(tag: string): string | undefined {
  let canonical: string | undefined
  try {
    canonical = Intl.getCanonicalLocales(tag)[0]
  } catch {
    return undefined
  }
  if (!canonical) return undefined
  return Intl.NumberFormat.supportedLocalesOf([canonical], { localeMatcher: 'lookup' }).length === 1 ? canonical : undefined
}

const PHONE = /^\+?[0-9][0-9 ().-]*[0-9]$/

/** The digits of a phone number as a `tel:` URI takes them (`+1 (555) 010-0199` -> `+15550100199`). */
export const telOf = (phone: string) => phone.replace(/[^+\d]/g, '')

/** Why `text` is not an https URL a debtor may be sent to; undefined when it is one. */
function httpsUrlProblem(text: string): string | undefined {
  let url: URL
  try {
    url = new URL(text)
  } catch {
    return 'must be an https URL, such as https://acme-cu.example/help'
  }
  if (url.protocol !== 'https:') return 'must be an https URL, such as https://acme-cu.example/help'
  // A domain name: labels of letters, digits and hyphens, the last one starting with a letter (no top-level
  // domain is numeric), so an IP address in any spelling the URL parser reads (`127.0.0.1`, `0x7f.1`, `[::1]`) is not.
  if (!/^([a-z0-9-]+\.)+[a-z][a-z0-9-]*$/i.test(url.hostname)) {
    return 'must name a host by its domain name, such as acme-cu.example, not an IP address'
  }
  if (url.username !== '' || url.password !== '') return 'must not carry a user name or password'
  return undefined
}

const displayText = (max: number) =>
  z
    .string()
    .min(1)
    .max(max)
    .superRefine(refuseUnsafeDisplayText)
    .refine((s) => s.length === 0 || s.trim().length > 0, 'must not be blank')

export const Branding = z
  .strictObject({
    displayName: displayText(100)
      .describe("The name the page shows the debtor (`Payment requested by …`); omitted: the client's name, else its code.")
      .optional(),
    accentColor: z
      .string()
      .transform((s) => s.toLowerCase())
      .superRefine((c, ctx) => {
        if (!ACCENT_COLOR.test(c)) ctx.addIssue({ code: 'custom', message: 'must be a colour #rrggbb, such as #1d4ed8' })
        else if (contrastRatio(c, '#ffffff') < MIN_ACCENT_CONTRAST) {
          ctx.addIssue({
            code: 'custom',
            message: `has a contrast of ${contrastRatio(c, '#ffffff').toFixed(2)}:1 against white; white text on the Pay button and links on the white page need at least ${MIN_ACCENT_CONTRAST}:1 (WCAG AA): choose a darker colour`,
          })
        }
      })
      .describe(
        'The Pay button and links, `#rrggbb`, with a contrast of at least 4.5:1 against white (WCAG AA), since the button carries white text; stored in lower case. Omitted: the service blue #1d4ed8.',
      )
      .optional(),
    supportEmail: z
      .email()
      .max(254)
      .superRefine(refuseUnsafeDisplayText)
      .describe('Shown on every page state as a mailto: link.')
      .optional(),
    supportPhone: z
      .string()
      .max(32)
      .regex(PHONE, 'must be a phone number: digits, spaces, ( ) . - and an optional leading +')
      .refine((s) => {
        const digits = s.replace(/\D/g, '').length
        return !PHONE.test(s) || (digits >= 5 && digits <= 15)
      }, 'must hold 5 to 15 digits')
      .describe('Shown as written on every page state, linked as tel: with its digits (`+1 555 010 0199`).')
      .optional(),
    supportUrl: z
      .string()
      .max(2048)
      .superRefine(refuseUnsafeDisplayText)
      .superRefine((u, ctx) => {
        const problem = httpsUrlProblem(u)
        if (problem) ctx.addIssue({ code: 'custom', message: problem })
      })
      .describe('A help page of the credit union, https only; shown on every page state as a link.')
      .optional(),
    locale: z
      .string()
      .max(35)
      .refine(
        (s) => supportedLocale(s) !== undefined,
        'must be a BCP 47 language tag the service can format numbers in, such as en-US or fr-CA',
      )
      .transform((s) => supportedLocale(s) as string)
      .describe(
        "The locale amounts are written in (`en-US`: $1,234.50; `fr-CA`: 1 234,50 $ US); the currency is the request's. Omitted: en-US.",
      )
      .optional(),
  })
  .meta({
    id: 'OperatorBranding',
    description: "The client's face on the hosted payment page. Replaced as a whole by a PUT: omitted fields are removed.",
    examples: [
      {
        displayName: 'Acme Credit Union',
        accentColor: '#0f5132',
        supportEmail: 'help@acme-cu.example',
        supportPhone: '+1 555 010 0199',
        supportUrl: 'https://acme-cu.example/help',
        locale: 'en-US',
      },
    ],
  })
export type Branding = z.output<typeof Branding>

/** The stored branding's fields, each null when not set (the operator API's answer, the page's input). */
export interface BrandingFields {
  displayName: string | null
  accentColor: string | null
  supportEmail: string | null
  supportPhone: string | null
  supportUrl: string | null
  locale: string | null
}

/** Every field, null where the stored branding (null: none) does not set it. */
export function brandingFields(stored: Partial<Record<keyof BrandingFields, unknown>> | null): BrandingFields {
  const text = (v: unknown) => (typeof v === 'string' ? v : null)
  return {
    displayName: text(stored?.displayName),
    accentColor: text(stored?.accentColor),
    supportEmail: text(stored?.supportEmail),
    supportPhone: text(stored?.supportPhone),
    supportUrl: text(stored?.supportUrl),
    locale: text(stored?.locale),
  }
}
