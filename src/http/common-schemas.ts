import { z } from 'zod'
import { ExternalId } from '../domain/identifiers.ts'

// Zod 4's int() is a safe integer: it refuses anything above 9007199254740991 itself.
export const SafeInteger = z.number().int().min(0).meta({ id: 'SafeInteger' })

export const ClientParams = z.strictObject({ clientCode: ExternalId })

/** List paging: `?cursor=&limit=` (1..200, default 50); the cursor is opaque. */
export const ListQuery = z.strictObject({
  cursor: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,400}$/, 'must be a cursor returned by a previous page')
    .optional()
    .describe("The previous page's nextCursor, to read the next page; omitted for the first page."),
  limit: z.coerce.number().int().min(1).max(200).default(50).describe('Items per page, 1 to 200.'),
})

/** A page of `item`s; its example is a last page holding the item's own first example. */
export function listResponse<T extends z.ZodType>(item: T, id: string) {
  const itemExample = (z.globalRegistry.get(item)?.examples as unknown[] | undefined)?.[0]
  return z
    .object({ data: z.array(item), nextCursor: z.string().nullable() })
    .meta({ id, ...(itemExample === undefined ? {} : { examples: [{ data: [itemExample], nextCursor: null }] }) })
}
