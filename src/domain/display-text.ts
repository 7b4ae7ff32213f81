import type { z } from 'zod'

/**
 * Text the hosted payment page shows a debtor (a Payment request's description, the creditor's name) may hold
 * no character that changes how the text around it reads (docs/decisions.md, "Text shown to the debtor"):
 * - bidirectional controls, U+202A..U+202E and U+2066..U+2069 ("Pay to U+202E moc.live U+202C" reads as
 *   another creditor's address);
 * - the line and paragraph separators U+2028 and U+2029;
 * - every C0 control (U+0000..U+001F, tab and line feed included), DEL (U+007F) and every C1 control
 *   (U+0080..U+009F, U+0085 "next line" included).
 */
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is this expression's purpose
export const UNSAFE_DISPLAY_CHARACTER = /[\u0000-\u001F\u007F-\u009F\u2028\u2029\u202A-\u202E\u2066-\u2069]/

const codePoint = (c: string) => `U+${(c.codePointAt(0) ?? 0).toString(16).toUpperCase().padStart(4, '0')}`

function kindOf(c: string): string {
  const n = c.codePointAt(0) ?? 0
  if (n === 0x2028 || n === 0x2029) return 'a line or paragraph separator'
  if (n >= 0x2000) return 'a bidirectional control'
  return 'a control character'
}

/** The first character of `text` a debtor must not be shown, as "U+202E (a bidirectional control)"; else undefined. */
export function unsafeDisplayCharacter(text: string): string | undefined {
  const found = UNSAFE_DISPLAY_CHARACTER.exec(text)?.[0]
  return found === undefined ? undefined : `${codePoint(found)} (${kindOf(found)})`
}

/**
 * The one refinement of every field the hosted page shows: a `custom` issue at the field (422, its pointer).
 * Use as `z.string()....superRefine(refuseUnsafeDisplayText)`.
 */
export function refuseUnsafeDisplayText(value: string, ctx: z.core.$RefinementCtx<string>): void {
  const found = unsafeDisplayCharacter(value)
  if (found) ctx.addIssue({ code: 'custom', message: `is shown to the debtor and must not contain ${found}` })
}
