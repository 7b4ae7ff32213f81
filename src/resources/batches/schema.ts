import { z } from 'zod'
import { ExternalId } from '../../domain/identifiers.ts'
import { Timestamp } from '../../domain/time.ts'
import { ClientParams } from '../../http/common-schemas.ts'

export const RECORD_KINDS = ['customer', 'receivable', 'payment_observation', 'adjustment', 'credit_note', 'write_off'] as const
export const MAX_BATCH_RECORDS = 100
export const BATCH_STATUSES = ['queued', 'running', 'succeeded', 'partially_succeeded', 'failed'] as const
export const RECORD_STATUSES = ['pending', 'succeeded', 'failed', 'dependency_failed'] as const

const RecordId = z.string().regex(/^[A-Za-z0-9_.:-]{1,128}$/, 'must be 1 to 128 characters of A-Z, a-z, 0-9, _ . : -')

const BatchRecord = z
  .strictObject({
    recordId: RecordId,
    kind: z.enum(RECORD_KINDS),
    externalId: ExternalId,
    dependsOn: z.array(RecordId).max(MAX_BATCH_RECORDS).optional(),
    body: z
      .record(z.string(), z.unknown())
      .describe('Exactly the body of the synchronous PUT for this kind; validated when the record runs.'),
  })
  .meta({ id: 'BatchRecord' })

export const BatchWrite = z
  .strictObject({ records: z.array(BatchRecord).min(1).max(MAX_BATCH_RECORDS) })
  .superRefine((b, ctx) => {
    const seen = new Map<string, number>()
    b.records.forEach((r, i) => {
      if (seen.has(r.recordId)) {
        ctx.addIssue({ code: 'custom', path: ['records', i, 'recordId'], message: `repeats records[${seen.get(r.recordId)}].recordId` })
      }
      ;(r.dependsOn ?? []).forEach((dep, j) => {
        if (!seen.has(dep)) {
          ctx.addIssue({ code: 'custom', path: ['records', i, 'dependsOn', j], message: `must name an earlier record (${dep} is not one)` })
        }
      })
      if (!seen.has(r.recordId)) seen.set(r.recordId, i)
    })
  })
  .meta({ id: 'BatchWrite', description: 'At most 100 records, processed in array order. A batch never declares a complete book.' })
export type BatchWrite = z.output<typeof BatchWrite>

export const BatchParams = ClientParams.extend({ externalBatchId: ExternalId })

export const BatchRecordOutcome = z
  .object({
    position: z.number().int().min(1),
    recordId: z.string(),
    kind: z.enum(RECORD_KINDS),
    externalId: z.string(),
    status: z.enum(RECORD_STATUSES),
    httpStatus: z.number().int().optional(),
    problem: z.object({ type: z.string() }).optional(),
    blockedBy: z.string().optional(),
  })
  .meta({ id: 'BatchRecordOutcome' })

export const BatchResponse = z
  .object({
    externalBatchId: z.string(),
    status: z.enum(BATCH_STATUSES),
    bookCompleteness: z.literal('not_declared'),
    submittedAt: Timestamp,
    completedAt: Timestamp.optional(),
    counts: z.object({
      total: z.number().int(),
      pending: z.number().int(),
      succeeded: z.number().int(),
      failed: z.number().int(),
      dependencyFailed: z.number().int(),
    }),
    records: z.array(BatchRecordOutcome),
  })
  .meta({ id: 'Batch' })
export type BatchResponse = z.output<typeof BatchResponse>
