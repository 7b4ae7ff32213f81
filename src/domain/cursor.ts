import { z } from 'zod'
import { EXTERNAL_ID_PATTERN } from './identifiers.ts'
import { fieldProblem } from './problems.ts'
import { Timestamp } from './time.ts'

/**
 * The cursor codec of every list: a cursor is base64url JSON, opaque to clients, and what it carries is checked
 * against a schema as strict as the column it is compared with before it reaches a store.
 *
 * Every cursor names the list that returned it (`l`, such as `"payment-requests"`): lists whose keys have one shape
 * (the newest-first lists, the lists in identifier order) would otherwise take each other's cursors and page from
 * a place that means nothing to them. A cursor of another list, or of no list, is a 422 (docs/decisions.md,
 * "Lists"). The names are the lists' own (a constant at each list); one name, one list, which test/api/cursors.test.ts checks pairwise.
 */
export function encodeCursor(list: string, value: Readonly<Record<string, unknown>>): string {
  return Buffer.from(JSON.stringify({ l: list, ...value })).toString('base64url')
}

/** The change feed's name in its cursors (read by the feed and by the webhook endpoint's replay). */
export const CHANGE_FEED = 'changes'

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
 * The value a cursor of `list` carries, checked as strictly as the column it is compared with; any other text (not
 * base64url JSON, another list's cursor, a number beyond the column's range, text the store cannot keep) is a
 * 422 `invalid_format` at `pointer`. So nothing a client puts in a cursor reaches the store unchecked.
 * `unnamed`: a cursor without a list name is also read (the change feed's positions, which integrators keep for
 * good, were issued before cursors named their list; no other list's cursor has their shape).
 */
export function readCursor<T>(
  list: string,
  cursor: string | undefined,
  schema: z.ZodType<T>,
  pointer: string,
  detail: string,
  opts: { unnamed?: boolean } = {},
): T | undefined {
  if (cursor === undefined) return undefined
  let raw: unknown
  try {
    raw = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'))
  } catch {
    raw = undefined
  }
  let value: unknown
  if (raw !== null && typeof raw === 'object' && !Array.isArray(raw)) {
    const { l, ...rest } = raw as Record<string, unknown>
    if (l === list || (l === undefined && opts.unnamed && !('l' in raw))) value = rest
  }
  const parsed = schema.safeParse(value)
  if (!parsed.success) throw fieldProblem(pointer, 'invalid_format', detail)
  return parsed.data
}

/**
 * A creation time as a newest-first cursor carries it: UTC with exactly six fractional digits (the microseconds
 * PostgreSQL keeps, so the key compares exactly whatever precision the column holds), calendar-valid, and not in
 * year 0 (a valid ISO date but no PostgreSQL timestamp).
 */
const CreationTime = Timestamp.regex(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/).refine((s) => !s.startsWith('0000'))

/**
 * The cursor of a newest-first list (docs/decisions.md, "Lists"): `{after: [createdAt, id]}`, the creation time and
 * identifier of the last item shown. The next page holds the items strictly before it in (creation time, id)
 * order; both never change once a row exists, so paging while others write never skips or repeats an item.
 */
export const NewestFirstCursor = z.strictObject({ after: z.tuple([CreationTime, z.string().regex(EXTERNAL_ID_PATTERN)]) })

/** Where a newest-first page starts: strictly before this creation time and identifier. */
export interface NewestFirstKey {
  at: string
  id: string
}

/** The decoded cursor of the newest-first list `list`; any other text (another list's cursor too) is a 422 at /query/cursor. */
export function readNewestFirstCursor(list: string, cursor: string | undefined): NewestFirstKey | undefined {
  const c = readCursor(list, cursor, NewestFirstCursor, '/query/cursor', 'is not a cursor this list returned')
  return c && { at: c.after[0], id: c.after[1] }
}

/**
 * A newest-first page from rows read with `limit + 1` (the extra row only says another page follows); each row's
 * `list_at` is its creation time as the cursor carries it (the store's `newestFirst` selects it).
 */
export function newestFirstPage<R extends { list_at: string }>(list: string, rows: readonly R[], limit: number, idOf: (row: R) => string) {
  const page = rows.slice(0, limit)
  const last = page.at(-1)
  return { page, nextCursor: rows.length > limit && last ? encodeCursor(list, { after: [last.list_at, idOf(last)] }) : null }
}
