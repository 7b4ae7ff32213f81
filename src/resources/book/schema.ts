import { z } from 'zod'
import { ExternalId } from '../../domain/identifiers.ts'
import { Timestamp } from '../../domain/time.ts'
import { ClientParams } from '../../http/common-schemas.ts'
import { SafeInteger } from '../receivables/schema.ts'

export const MAX_DECLARED_BATCHES = 50
export const MAX_LISTED_OMISSIONS = 100

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
  .meta({ id: 'BookCompletionWrite', description: 'Declares that the listed batches cover every Receivable of the client.' })
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
  .meta({ id: 'BookCompletion' })
