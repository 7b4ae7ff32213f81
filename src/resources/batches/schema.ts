import { z } from 'zod'
import { ExternalId } from '../../domain/identifiers.ts'
import { Timestamp } from '../../domain/time.ts'
import { ClientParams, ListQuery, listResponse } from '../../http/common-schemas.ts'
import {
  BATCH_CUSTOMER_EXAMPLE_ID,
  BATCH_EXAMPLE_ID,
  BATCH_RECEIVABLE_EXAMPLE_ID,
  batchCustomerWriteExample,
  batchReceivableWriteExample,
  RECEIVABLE_EXAMPLE_ID,
  receivableWriteExample,
} from '../demo-examples.ts'

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

/**
 * The demo's nightly export as one batch: the business Customer, its line of credit (which waits for that
 * Customer), and the seeded Receivable again, unchanged (an identical write: 200). The book-completion
 * example declares this batch the whole book.
 */
const batchWriteExample = {
  records: [
    { recordId: 'customer-2', kind: 'customer', externalId: BATCH_CUSTOMER_EXAMPLE_ID, body: batchCustomerWriteExample },
    {
      recordId: 'receivable-2',
      kind: 'receivable',
      externalId: BATCH_RECEIVABLE_EXAMPLE_ID,
      dependsOn: ['customer-2'],
      body: batchReceivableWriteExample,
    },
    { recordId: 'receivable-1', kind: 'receivable', externalId: RECEIVABLE_EXAMPLE_ID, body: receivableWriteExample },
  ],
} as const

/** The batch example as the GET answers it: finished (each record with its synchronous status), or just queued. */
function batchResponseExample(status: 'succeeded' | 'queued', times: { completedAt?: string }) {
  const done = status === 'succeeded'
  const httpStatus = { 'customer-2': 201, 'receivable-2': 201, 'receivable-1': 200 } as const
  return {
    externalBatchId: BATCH_EXAMPLE_ID,
    status,
    bookCompleteness: 'not_declared',
    submittedAt: '2026-02-01T05:40:00.212Z',
    ...times,
    counts: { total: 3, pending: done ? 0 : 3, succeeded: done ? 3 : 0, failed: 0, dependencyFailed: 0 },
    records: batchWriteExample.records.map((r, i) => ({
      position: i + 1,
      recordId: r.recordId,
      kind: r.kind,
      externalId: r.externalId,
      status: done ? 'succeeded' : 'pending',
      ...(done ? { httpStatus: httpStatus[r.recordId] } : {}),
    })),
  }
}

/**
 * Either `records` (a new batch) or `retryOf` (the failed and blocked records of an earlier, finished batch:
 * docs/decisions.md, "Retry only what failed"), never both. One object rather than a union, so that an invalid
 * record is refused at its own pointer (a union would refuse the whole body at `/`).
 */
export const BatchWrite = z
  .strictObject({
    records: z
      .array(BatchRecord)
      .min(1)
      .max(MAX_BATCH_RECORDS)
      .optional()
      .describe('The records, in the order they run. Absent on a retry.'),
    retryOf: ExternalId.optional().describe(
      "A retry: the `externalBatchId` of an earlier batch of this client that has finished. The new batch holds exactly that batch's records that ended `failed` or `dependency_failed`, in their order, each with `retriedFrom`; a dependency on a record that succeeded counts as met. Absent on an ordinary batch.",
    ),
  })
  .superRefine((b, ctx) => {
    if (b.records === undefined && b.retryOf === undefined) {
      ctx.addIssue({
        code: 'invalid_type',
        expected: 'array',
        input: undefined,
        path: ['records'],
        message: 'Invalid input: expected array, received undefined',
      })
      return
    }
    if (b.records !== undefined && b.retryOf !== undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['retryOf'],
        message: 'a retry takes its records from the earlier batch: send either records or retryOf, not both',
      })
      return
    }
    const seen = new Map<string, number>()
    ;(b.records ?? []).forEach((r, i) => {
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
  .meta({
    id: 'BatchWrite',
    description:
      'At most 100 records, processed in array order; or `retryOf`, a new batch of the failed and blocked records of an earlier one. A batch never declares a complete book.',
    examples: [batchWriteExample],
  })
export type BatchWrite = z.output<typeof BatchWrite>

export const BatchParams = ClientParams.extend({ externalBatchId: ExternalId })

export const BatchRecordProblem = z
  .looseObject({
    type: z.string().describe('{docs_url}/problems/<code>, as the synchronous route answered'),
    title: z.string(),
    status: z.number().int().describe("Equal to the record's `httpStatus`."),
    detail: z.string(),
    errors: z
      .array(z.object({ code: z.string(), detail: z.string(), pointer: z.string() }))
      .optional()
      .describe(
        "On 422: one entry per invalid field, exactly as the synchronous route answers. `pointer` is a JSON pointer into the record's `body` (`/name/firstName`), not into the batch request.",
      ),
  })
  .meta({
    id: 'BatchRecordProblem',
    description:
      'The problem the synchronous route would have answered for this record, without `requestId` (there was no request): `type`, `title`, `status`, `detail`, `errors[]` on 422, and any extension members of that problem (such as `currentSourceRevision`). Fix the record from these; no replay is needed to see them.',
  })

export const BatchRecordOutcome = z
  .object({
    position: z.number().int().min(1),
    recordId: z.string(),
    kind: z.enum(RECORD_KINDS),
    externalId: z.string(),
    status: z.enum(RECORD_STATUSES),
    httpStatus: z.number().int().optional(),
    problem: BatchRecordProblem.optional().describe('On `failed`: the problem the synchronous route answered.'),
    blockedBy: z.string().optional(),
    retriedFrom: z
      .object({ externalBatchId: z.string(), position: z.number().int().min(1) })
      .optional()
      .describe('On a record of a retry batch: the earlier batch and the position there of the record it retries.'),
  })
  .meta({ id: 'BatchRecordOutcome' })

export const BatchResponse = z
  .object({
    externalBatchId: z.string(),
    retryOf: z.string().optional().describe('On a retry batch: the earlier batch whose failed and blocked records it holds.'),
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
  .meta({
    id: 'Batch',
    examples: [batchResponseExample('succeeded', { completedAt: '2026-02-01T05:40:00.655Z' }), batchResponseExample('queued', {})],
  })
export type BatchResponse = z.output<typeof BatchResponse>

export const BatchListQuery = ListQuery.extend({
  status: z.enum(BATCH_STATUSES).optional().describe('Only the batches in this status.'),
})
export type BatchListQuery = z.output<typeof BatchListQuery>
export const BatchList = listResponse(BatchResponse, 'BatchList')
