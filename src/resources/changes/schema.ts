import { z } from 'zod'
import { Timestamp } from '../../domain/time.ts'
import { ClientParams, PageLimit } from '../../http/common-schemas.ts'
import { CHANGE_TYPES, RESOURCE_TYPES } from '../feed/store.ts'

export const ChangesQuery = z.strictObject({
  after: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,200}$/, 'must be a cursor returned by a previous page')
    .optional(),
  limit: PageLimit,
})
export const ChangesParams = ClientParams

/** A change-feed event: identity and revision only, never Customer, contact or financial detail. */
export const ChangeEvent = z
  .object({
    eventId: z.string().uuid(),
    type: z.enum(CHANGE_TYPES),
    resource: z.object({ type: z.enum(RESOURCE_TYPES), id: z.string() }),
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
  .meta({
    id: 'ChangePage',
    examples: [
      {
        data: [
          {
            eventId: '0b7c2d4e-5f60-4a1b-8c9d-0e1f2a3b4c5d',
            type: 'customer.created',
            resource: { type: 'customer', id: 'cust-demo-1' },
            revision: 1,
            occurredAt: '2026-01-31T09:30:00.041Z',
          },
          {
            eventId: '6e5d4c3b-2a19-4f08-9e7d-6c5b4a392817',
            type: 'receivable.created',
            resource: { type: 'receivable', id: 'rcv-demo-1' },
            revision: 1,
            occurredAt: '2026-01-31T09:30:00.112Z',
          },
        ],
        nextCursor: 'eyJzIjoiMiJ9',
        hasMore: false,
      },
    ],
  })
