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

const previewExample = {
  ...bookCompletionWriteExample,
  scope: 'all_receivables',
  coveredReceivableCount: 2,
  omissions: [],
  omissionsTruncated: false,
  omittedReceivableCount: 0,
  releases: [],
  releasesTruncated: false,
  releasedReceivableCount: 0,
}

/**
 * What declaring this body would do, now, changing nothing (docs/decisions.md, "Previewing a complete book"): the
 * declaration's own fields, less those only an accepted declaration has, plus the releases it would make.
 */
export const BookCompletionPreview = z
  .object({
    asOf: Timestamp,
    batches: z.array(z.string()),
    coveredReceivableCount: z.number().int().describe('Receivables the listed batches wrote successfully.'),
    omissions: z
      .array(
        z.object({
          externalReceivableId: z.string(),
          newlyHeld: z
            .boolean()
            .describe(
              'True when the flag would place the `other_protection` hold (an active Receivable not already flagged); false when that hold is already there (flagged by an earlier declaration, or paused).',
            ),
        }),
      )
      .describe('The first 100 Receivables the declaration would flag, by `externalReceivableId`: the order its GET lists them in.'),
    omissionsTruncated: z.boolean().describe('True when more than 100 Receivables would be flagged.'),
    omittedReceivableCount: z.number().int().describe('Exact total the declaration would flag.'),
    releases: z
      .array(z.object({ externalReceivableId: z.string() }))
      .describe(
        'The first 100 Receivables, by `externalReceivableId`, that an earlier declaration flagged, are still held, and that the listed batches cover: the declaration would release them.',
      ),
    releasesTruncated: z.boolean().describe('True when more than 100 Receivables would be released.'),
    releasedReceivableCount: z.number().int().describe('Exact total the declaration would release.'),
    scope: z.literal('all_receivables'),
    sourcePosition: z.number().int(),
  })
  .meta({ id: 'BookCompletionPreview', examples: [previewExample] })
export type BookCompletionPreview = z.output<typeof BookCompletionPreview>
