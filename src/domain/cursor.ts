import { z } from 'zod'
import { EXTERNAL_ID_PATTERN } from './identifiers.ts'
import { fieldProblem } from './problems.ts'

/**
 * The cursor codec of every list: a cursor is base64url JSON, opaque to clients, and what it carries is checked
 * against a schema as strict as the column it is compared with before it reaches a store.
 */
export function encodeCursor(value: unknown): string {
  return Buffer.from(JSON.stringify(value)).toString('base64url')
}

/** The largest PostgreSQL `bigint`. */
export const BIGINT_MAX = 9_223_372_036_854_775_807n
const DECIMAL = /^(0|[1-9]\d{0,18})$/

/**
 * A bigint sequence number in decimal, as cursors carry them: no sign, no leading zero, from `min` to BIGINT_MAX.
 * A larger number, compared with a bigint column, made the store fail (a 503 for what is bad input).
 */
export function sequenceNumber(min: 0n | 1n, message: string) {
  return z
    .string()
    .regex(DECIMAL, message)
    .refine((s) => !DECIMAL.test(s) || (BigInt(s) >= min && BigInt(s) <= BIGINT_MAX), {
      message,
      params: { fieldCode: 'invalid_format' },
    })
}

/** The cursor of a list in sequence order: `{s}`, a sequence number from `min` (0 where an empty feed's cursor says "from the start"). */
export const seqCursor = (min: 0n | 1n) => z.strictObject({ s: sequenceNumber(min, 'is not a sequence number') })

/** The cursor of a list in identifier order: `{after}`, an identifier as the list's key column holds it. */
export const IdentifierCursor = z.strictObject({ after: z.string().regex(EXTERNAL_ID_PATTERN) })

/**
 * The value a cursor carries, checked as strictly as the column it is compared with; any other text (not
 * base64url JSON, another list's cursor, a number beyond the column's range, text the store cannot keep) is a
 * 422 `invalid_format` at `pointer`. So nothing a client puts in a cursor reaches the store unchecked.
 */
export function readCursor<T>(cursor: string | undefined, schema: z.ZodType<T>, pointer: string, detail: string): T | undefined {
  if (cursor === undefined) return undefined
  let raw: unknown
  try {
    raw = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'))
  } catch {
    raw = undefined
  }
  const parsed = schema.safeParse(raw)
  if (!parsed.success) throw fieldProblem(pointer, 'invalid_format', detail)
  return parsed.data
}
