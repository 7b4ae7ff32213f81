import type { z } from 'zod'

/**
 * Text the hosted payment page shows a debtor (a Payment request's description, the creditor's name, the page's
 * branding) may hold no character that changes how the text around it reads or that cannot be seen
 * (docs/decisions.md, "Text shown to the debtor"):
 * - bidirectional controls and marks: U+202A..U+202E, U+2066..U+2069 ("Pay to U+202E moc.live U+202C" reads as
 *   another creditor's address), U+200E, U+200F and U+061C (the left-to-right, right-to-left and Arabic letter
 *   marks, which reorder neutral characters as well);
 * - the line and paragraph separators U+2028 and U+2029;
 * - every C0 control (U+0000..U+001F, tab and line feed included), DEL (U+007F) and every C1 control
 *   (U+0080..U+009F, U+0085 "next line" included);
 * - invisible characters, which make two names that read alike different texts ("Acme" and "Ac<U+200B>me"):
 *   U+00AD (soft hyphen), U+115F, U+1160, U+3164 and U+FFA0 (the Hangul fillers), U+180E (Mongolian vowel
 *   separator), U+200B..U+200D (zero width space, non-joiner, joiner), U+2060..U+2064 (word joiner, invisible
 *   operators), U+206A..U+206F (deprecated format characters), U+FEFF (zero width no-break space),
 *   U+FFF9..U+FFFB (interlinear annotation) and the tag characters U+E0000..U+E007F.
 */
export const UNSAFE_DISPLAY_CHARACTER =
  // biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is this expression's purpose
  /[\u0000-\u001F\u007F-\u009F\u00AD\u061C\u115F\u1160\u180E\u200B-\u200F\u2028-\u202E\u2060-\u2064\u2066-\u206F\u3164\uFEFF\uFFA0\uFFF9-\uFFFB\u{E0000}-\u{E007F}]/u

const BIDI = new Set([0x061c, 0x200e, 0x200f, 0x202a, 0x202b, 0x202c, 0x202d, 0x202e, 0x2066, 0x2067, 0x2068, 0x2069])

const codePoint = (c: string) => `U+${(c.codePointAt(0) ?? 0).toString(16).toUpperCase().padStart(4, '0')}`

function kindOf(c: string): string {
  const n = c.codePointAt(0) ?? 0
  if (n === 0x2028 || n === 0x2029) return 'a line or paragraph separator'
  if (BIDI.has(n)) return 'a bidirectional control'
  if (n <= 0x9f) return 'a control character'
  return 'an invisible character'
}

/** The first character of `text` a debtor must not be shown, as "U+202E (a bidirectional control)"; else undefined. */
export function unsafeDisplayCharacter(text: string): string | undefined {
  const found = UNSAFE_DISPLAY_CHARACTER.exec(text)?.[0]
  return found === undefined ? undefined : `${codePoint(found)} (${kindOf(found)})`
}

const UNSAFE_GLOBAL = new RegExp(UNSAFE_DISPLAY_CHARACTER.source, 'gu')

/** `text` with each such character (stored before it was refused) shown as U+FFFD. */
export function replaceUnsafeDisplayCharacters(text: string): string {
  return text.replace(UNSAFE_GLOBAL, '\uFFFD')
}

/**
 * The one refinement of every field the hosted page shows: a `custom` issue at the field (422, its pointer).
 * Use as `z.string()....superRefine(refuseUnsafeDisplayText)`.
 */
export function refuseUnsafeDisplayText(value: string, ctx: z.core.$RefinementCtx<string>): void {
  const found = unsafeDisplayCharacter(value)
  if (found) ctx.addIssue({ code: 'custom', message: `is shown to the debtor and must not contain ${found}` })
}

/**
 * The same characters refused in text only operators read (an API key's name, in lists and the audit trail), with
 * a message that says so.
 */
export function refuseUnsafeOperatorText(value: string, ctx: z.core.$RefinementCtx<string>): void {
  const found = unsafeDisplayCharacter(value)
  if (found) ctx.addIssue({ code: 'custom', message: `is shown to operators in lists and the audit trail and must not contain ${found}` })
}
