import { z } from 'zod'
import { ExternalId } from '../domain/identifiers.ts'

// Zod 4's int() is a safe integer: it refuses anything above 9007199254740991 itself.
export const SafeInteger = z.number().int().min(0).meta({ id: 'SafeInteger' })

export const ClientParams = z.strictObject({ clientCode: ExternalId })

const DECIMAL_DIGITS = /^(0|[1-9][0-9]*)$/
const LIMIT_SPELLING = 'must be a whole number from 1 to 200 in decimal digits, such as 50 (no sign, space, leading zero, exponent or hex)'

/**
 * A list's `limit`: decimal digits only, read as the number they spell; every other spelling (`0x10`, `1e2`,
 * ` 5`, `+5`, `05`, `5.0`, a repeated parameter) is a 422 `invalid_type` at /query/limit rather than a number
 * JavaScript could also read from it (docs/decisions.md, "Lists"). 0 and beyond 200 keep their `too_small` and
 * `too_big`. One schema for every list, v1 and operator.
 */
export const PageLimit = z
  .preprocess(
    (v) => (typeof v === 'string' && DECIMAL_DIGITS.test(v) ? Number(v) : v),
    z.number({ error: LIMIT_SPELLING }).min(1, { abort: true }).max(200, { abort: true }).int(LIMIT_SPELLING).default(50),
  )
  .describe('Items per page, 1 to 200, in decimal digits.')

/** List paging: `?cursor=&limit=` (1..200, default 50); the cursor is opaque. */
export const ListQuery = z.strictObject({
  cursor: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,400}$/, 'must be a cursor returned by a previous page')
    .optional()
    .describe("The previous page's nextCursor, to read the next page; omitted for the first page."),
  limit: PageLimit,
})

/** A page of `item`s; its example is a last page holding the item's own first example. */
export function listResponse<T extends z.ZodType>(item: T, id: string) {
  const itemExample = (z.globalRegistry.get(item)?.examples as unknown[] | undefined)?.[0]
  return z
    .object({ data: z.array(item), nextCursor: z.string().nullable() })
    .meta({ id, ...(itemExample === undefined ? {} : { examples: [{ data: [itemExample], nextCursor: null }] }) })
}
