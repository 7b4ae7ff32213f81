import { z } from 'zod'
import { Timestamp } from '../../domain/time.ts'
import { listResponse, PageLimit } from '../../http/common-schemas.ts'

/** What an entry of a Receivable's timeline records (docs/decisions.md, "A Receivable's timeline"). */
export const TIMELINE_KINDS = [
  'revision',
  'adjustment',
  'credit_note',
  'write_off',
  'payment_observation',
  'hold_placed',
  'hold_released',
  'recovery_instruction',
  'payment_request',
  'payment_request_expired',
  'payment_request_canceled',
  'payment',
  'refund',
  'refund_succeeded',
  'refund_failed',
  'reversal',
  'reinstatement',
  'reconciliation',
  'reconciliation_resolved',
  'receipt',
  'receipt_delivered',
  'receipt_abandoned',
] as const

/** `unknown`: a revision recorded before the service kept who made it (migration 0038). */
export const ACTOR_TYPES = ['integration', 'operator', 'provider', 'service', 'unknown'] as const

export const TimelineActor = z
  .object({
    type: z.enum(ACTOR_TYPES),
    name: z.string().optional().describe("The Integration's API key name, or the provider's name, where known."),
  })
  .meta({ id: 'TimelineActor' })

export const TimelineEntry = z
  .object({
    at: Timestamp,
    kind: z.enum(TIMELINE_KINDS),
    actor: TimelineActor,
    summary: z.string(),
    ref: z
      .object({ type: z.string(), id: z.string(), revision: z.number().int().optional() })
      .optional()
      .describe('The resource the entry is about, to read it (a Payment request, a refund, an instruction...).'),
  })
  .meta({
    id: 'TimelineEntry',
    examples: [
      {
        at: '2026-01-31T09:30:00.000000Z',
        kind: 'revision',
        actor: { type: 'integration', name: 'Core banking sync' },
        summary: 'Revision 1: created',
        ref: { type: 'receivable', id: 'recv-demo-1', revision: 1 },
      },
    ],
  })
export type TimelineEntry = z.output<typeof TimelineEntry>

export const TimelineQuery = z.strictObject({
  cursor: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,1200}$/, 'must be a cursor returned by a previous page')
    .optional()
    .describe("The previous page's nextCursor, to read the next page; omitted for the first page."),
  limit: PageLimit,
})

export const TimelinePage = listResponse(TimelineEntry, 'ReceivableTimeline')
