import { z } from 'zod'
import { ExternalId } from '../../domain/identifiers.ts'
import { Timestamp } from '../../domain/time.ts'
import { ClientParams, SafeInteger } from '../../http/common-schemas.ts'
import { BATCH_EXAMPLE_ID } from '../demo-examples.ts'

export const MAX_DECLARED_BATCHES = 50
export const MAX_LISTED_OMISSIONS = 100

/** The book after the batch example ran: its batch wrote both of the demo's Receivables, so nothing is omitted. */
export const BOOK_COMPLETION_EXAMPLE_ID = 'book-demo-1'
const bookCompletionWriteExample = { asOf: '2026-02-01T06:00:00Z', sourcePosition: 1200, batches: [BATCH_EXAMPLE_ID] }

export const BookCompletionWrite = z
  .strictObject({
    asOf: Timestamp,
    sourcePosition: SafeInteger,
    batches: z
      .array(ExternalId)
      .min(1)
      .max(MAX_DECLARED_BATCHES)
      .superRefine((ids, ctx) => {
        const seen = new Set<string>()
        ids.forEach((id, i) => {
          if (seen.has(id)) ctx.addIssue({ code: 'custom', path: [i], message: 'lists the same batch twice' })
          seen.add(id)
        })
      }),
  })
  .meta({
    id: 'BookCompletionWrite',
    description: 'Declares that the listed batches cover every Receivable of the client.',
    examples: [bookCompletionWriteExample],
  })
export type BookCompletionWrite = z.output<typeof BookCompletionWrite>

export const BookCompletionParams = ClientParams.extend({ externalCompletionId: ExternalId })

export const BookCompletion = z
  .object({
    externalCompletionId: z.string(),
    acceptedAt: Timestamp,
    asOf: Timestamp,
    batches: z.array(z.string()),
    coveredReceivableCount: z.number().int(),
    omissions: z.array(z.object({ externalReceivableId: z.string(), flaggedAt: Timestamp, state: z.enum(['held', 'released']) })),
    omissionsTruncated: z.boolean(),
    omittedReceivableCount: z.number().int(),
    scope: z.literal('all_receivables'),
    sourcePosition: z.number().int(),
  })
  .meta({
    id: 'BookCompletion',
    examples: [
      {
        externalCompletionId: BOOK_COMPLETION_EXAMPLE_ID,
        acceptedAt: '2026-02-01T06:00:01.204Z',
        ...bookCompletionWriteExample,
        coveredReceivableCount: 2,
        omissions: [],
        omissionsTruncated: false,
        omittedReceivableCount: 0,
        scope: 'all_receivables',
      },
    ],
  })
