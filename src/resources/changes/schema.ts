import { z } from 'zod'
import { Timestamp } from '../../domain/time.ts'
import { ClientParams } from '../../http/common-schemas.ts'

export const ChangesQuery = z.strictObject({
  after: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,200}$/, 'must be a cursor returned by a previous page')
    .optional(),
  limit: z.coerce.number().int().min(1).max(1000).default(100),
})
export const ChangesParams = ClientParams

/** A change-feed event: identity and revision only, never Customer, contact or financial detail. */
export const ChangeEvent = z
  .object({
    eventId: z.string().uuid(),
    type: z.enum(['customer.created', 'customer.updated', 'receivable.created', 'receivable.updated', 'payment_observation.created']),
    resource: z.object({ type: z.enum(['customer', 'receivable', 'payment_observation']), id: z.string() }),
    revision: z.number().int(),
    occurredAt: Timestamp,
  })
  .meta({ id: 'ChangeEvent' })

export const ChangePage = z
  .object({
    data: z.array(ChangeEvent),
    nextCursor: z.string().describe('Store it and pass it as `after` to resume; present even on an empty page.'),
    hasMore: z.boolean(),
  })
  .meta({ id: 'ChangePage' })
