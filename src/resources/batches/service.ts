import type { Grant } from '../../access/grants.ts'
import { canonicalDigest } from '../../domain/canonical.ts'
import { newestFirstPage, readNewestFirstCursor } from '../../domain/cursor.ts'
import { Problem, type ProblemCode, problemCatalogue, unknownReferences } from '../../domain/problems.ts'
import type { Scope } from '../../domain/scopes.ts'
import { type Clock, isoNow } from '../../domain/time.ts'
import { lockIdentity } from '../../store/locks.ts'
import type { Queryable, Store } from '../../store/store.ts'
import { answersInOrder } from '../../store/transactions.ts'
import { defineOperation, grantOf, type OperationContext, type RecordKind, type WriteOperation } from '../operations.ts'
import type { UnitOfWork } from '../unit-of-work.ts'
import { type BatchListQuery, BatchResponse, BatchWrite } from './schema.ts'
import {
  type BatchRecordRow,
  type BatchRow,
  batchRecords,
  batchRecordsOf,
  findBatch,
  insertBatch,
  listBatches,
  type QueuedRecord,
  recordsToRetry,
} from './store.ts'

export type OperationsByKind = Record<RecordKind, WriteOperation>

export interface BatchServiceDeps {
  store: Store
  clock: Clock
  operations: OperationsByKind
  docsUrl: string
  /** Called after a batch is committed, so this instance's worker starts at once instead of at its next poll. */
  onQueued?: () => void
}

export function scopesForKinds(operations: OperationsByKind, kinds: Iterable<string>): Scope[] {
  const scopes = new Set<Scope>()
  for (const k of kinds) for (const s of operations[k as RecordKind]?.scopes ?? []) scopes.add(s)
  return [...scopes]
}

/**
 * A failed record's problem, shaped as the problem body its synchronous route answered (requestId aside):
 * extension members first, as problemBody() places them, so the named members always win.
 */
function recordProblem(r: Omit<BatchRecordRow, 'body'>, docsUrl: string) {
  const code = r.problem_code as ProblemCode
  const title = problemCatalogue[code]?.title ?? code
  return {
    ...r.problem?.extensions,
    type: `${docsUrl}/problems/${code}`,
    title,
    status: r.http_status ?? problemCatalogue[code]?.status,
    detail: r.problem?.detail ?? title,
    ...(r.problem?.errors ? { errors: r.problem.errors } : {}),
  }
}

export function batchView(batch: BatchRow, records: Omit<BatchRecordRow, 'body'>[], docsUrl: string): BatchResponse {
  const counts = { total: records.length, pending: 0, succeeded: 0, failed: 0, dependencyFailed: 0 }
  for (const r of records) {
    if (r.status === 'dependency_failed') counts.dependencyFailed++
    else counts[r.status]++
  }
  const retryOf = records[0]?.retried_from_batch
  return {
    externalBatchId: batch.external_batch_id,
    ...(retryOf ? { retryOf } : {}),
    status: batch.status,
    bookCompleteness: 'not_declared',
    submittedAt: batch.submitted_at,
    ...(batch.completed_at ? { completedAt: batch.completed_at } : {}),
    counts,
    records: records.map((r) => ({
      position: r.position,
      recordId: r.record_id,
      kind: r.kind as RecordKind,
      externalId: r.external_id,
      status: r.status,
      ...(r.http_status !== null ? { httpStatus: r.http_status } : {}),
      ...(r.problem_code ? { problem: recordProblem(r, docsUrl) } : {}),
      ...(r.blocked_by ? { blockedBy: r.blocked_by } : {}),
      ...(r.retried_from_batch
        ? { retriedFrom: { externalBatchId: r.retried_from_batch, position: Number(r.retried_from_position) } }
        : {}),
    })),
  }
}

/**
 * The refusal of a grant that may not read a batch (docs/decisions.md, "Reading a batch leaks nothing"): a batch
 * needs the write scope of every kind it holds (`kinds`); an unknown batch (`kinds` undefined) is treated as
 * needing the write scope of every kind there is, so the refusal never tells whether the batch exists. Undefined
 * when the grant may read it.
 */
function readRefusal(operations: OperationsByKind, grant: Grant, clientCode: string, kinds: Iterable<string> | undefined) {
  const all = scopesForKinds(operations, Object.keys(operations))
  const lacking = all.filter((s) => !grant.scopes.has(s))
  const refused = kinds === undefined ? lacking.length > 0 : scopesForKinds(operations, kinds).some((s) => !grant.scopes.has(s))
  if (!refused) return undefined
  return new Problem(
    'client_scope_denied',
    `The grant for client ${clientCode} may not read this batch: reading a batch needs the write scope of every record kind it holds, this grant lacks ${lacking.join(', ')}, and an unknown batch answers this same refusal.`,
  )
}

/**
 * The earlier batch a retry names, read before the retry's identity is looked at, so that a grant that may not
 * read it learns nothing, not even whether the retry's identifier is taken: unknown, 422 `unknown_reference` at
 * /retryOf (or the read refusal, for a grant that could read no batch at all); one the grant may not read, 403
 * as its GET answers.
 */
async function readEarlier(db: Queryable, operations: OperationsByKind, grant: Grant, clientCode: string, earlier: string) {
  const batch = await findBatch(db, clientCode, earlier)
  if (!batch) {
    throw readRefusal(operations, grant, clientCode, undefined) ?? unknownReferences([{ pointer: '/retryOf', what: `Batch ${earlier}` }])
  }
  const records = await recordsToRetry(db, clientCode, earlier)
  const refusal = readRefusal(operations, grant, clientCode, new Set(records.map((r) => r.kind)))
  if (refusal) throw refusal
  return { batch, records }
}

/**
 * The records of a retry of `earlier` (docs/decisions.md, "Retry only what failed"): those that ended `failed` or
 * `dependency_failed`, in their order, each naming the record it retries. A dependency on another retried record
 * is kept; one on a record that succeeded is met, so it is dropped. Refused: an earlier batch not finished (409
 * `batch_not_finished`), or with nothing to retry (422 `custom` at /retryOf).
 */
function retryRecords({ batch, records }: Awaited<ReturnType<typeof readEarlier>>): QueuedRecord[] {
  const earlier = batch.external_batch_id
  if (batch.status === 'queued' || batch.status === 'running') {
    throw new Problem('batch_not_finished', `Batch ${earlier} is ${batch.status}: poll it until it has finished, then retry it.`, {
      extensions: { retryOf: earlier, retryOfStatus: batch.status },
    })
  }
  const retried = records.filter((r) => r.status === 'failed' || r.status === 'dependency_failed')
  if (retried.length === 0) {
    throw new Problem('validation_error', `/retryOf: batch ${earlier} has no failed or blocked record to retry`, {
      errors: [{ code: 'custom', detail: `Batch ${earlier} has no failed or blocked record to retry`, pointer: '/retryOf' }],
    })
  }
  const ids = new Set(retried.map((r) => r.record_id))
  return retried.map((r) => ({
    recordId: r.record_id,
    kind: r.kind,
    externalId: r.external_id,
    dependsOn: r.depends_on.filter((d) => ids.has(d)),
    body: r.body,
    retriedFrom: { externalBatchId: earlier, position: r.position },
  }))
}

export function createBatchService({ store, clock, operations, docsUrl, onQueued }: BatchServiceDeps) {
  const allBatchScopes = scopesForKinds(operations, Object.keys(operations))
  async function load(db: Queryable, clientCode: string, id: string) {
    const batch = await findBatch(db, clientCode, id)
    if (!batch) throw new Problem('batch_not_found', `No batch ${id} for this client.`)
    return { batch, records: await batchRecords(db, clientCode, id) }
  }

  /**
   * 202 with the queued batch; 200 with its current state on an identical retry; 409 for a different body. It
   * needs the write scope of every record kind it carries (`scopesFor`); a queued batch wakes the runner.
   */
  const submitOperation = defineOperation({
    kind: 'batch',
    scopes: [],
    // A retry's kinds are those of the earlier batch's records: checked in `run`, once they are read.
    scopesFor: (body: BatchWrite) => scopesForKinds(operations, new Set((body.records ?? []).map((r) => r.kind))),
    body: BatchWrite,
    response: BatchResponse,
    // Queued work, not yet heard: each record is a Source write when it runs.
    source: false,
    async run(uow: UnitOfWork, ctx: OperationContext, body: BatchWrite) {
      const { tx } = uow
      const { clientCode, id } = ctx
      const grant = grantOf(ctx)
      const digest = canonicalDigest(body)
      const earlier = body.retryOf !== undefined ? await readEarlier(tx, operations, grant, clientCode, body.retryOf) : undefined
      // The identity lock and the read in one round trip; the insert is sent ahead with the flush.
      const [, existing] = await answersInOrder([lockIdentity(tx, clientCode, 'batch', id), findBatch(tx, clientCode, id)])
      if (existing) {
        if (existing.body_digest !== digest) {
          throw new Problem('batch_conflict', `Batch ${id} already holds a different submission.`)
        }
        const { batch, records } = await load(tx, clientCode, id)
        return { status: 200 as const, body: async () => batchView(batch, records, docsUrl) }
      }
      const queued: readonly QueuedRecord[] = earlier ? retryRecords(earlier) : (body.records ?? [])
      const now = isoNow(clock)
      uow.send((sending) => insertBatch(sending, clientCode, id, grant.integrationId, digest, queued, now))
      // Rendered from what the statement wrote: the batch queued, every record pending.
      const batch: BatchRow = {
        external_batch_id: id,
        integration_id: grant.integrationId,
        body_digest: digest,
        status: 'queued',
        submitted_at: now,
        completed_at: null,
      }
      const records = queued.map((r, i) => ({
        position: i + 1,
        record_id: r.recordId,
        kind: r.kind,
        external_id: r.externalId,
        depends_on: [...(r.dependsOn ?? [])],
        status: 'pending' as const,
        http_status: null,
        problem_code: null,
        problem: null,
        blocked_by: null,
        retried_from_batch: r.retriedFrom?.externalBatchId ?? null,
        retried_from_position: r.retriedFrom?.position ?? null,
      }))
      return {
        status: 202 as const,
        body: async () => batchView(batch, records, docsUrl),
        ...(onQueued ? { afterCommit: onQueued } : {}),
      }
    },
  })

  return {
    submitOperation,

    /**
     * Authorized before anything about the batch is said (docs/decisions.md, "Reading a batch leaks nothing"):
     * a batch needs the write scope of every kind it holds, and an unknown batch is treated as needing the
     * write scope of every kind there is. So a grant that lacks any batch write scope gets the same 403, with
     * the same detail, for a batch it may not read and for no batch at all; only a grant that could read any
     * batch learns 404 batch_not_found.
     */
    async get(clientCode: string, grant: Grant, id: string): Promise<BatchResponse> {
      const batch = await findBatch(store, clientCode, id)
      if (!batch) {
        throw readRefusal(operations, grant, clientCode, undefined) ?? new Problem('batch_not_found', `No batch ${id} for this client.`)
      }
      const records = await batchRecords(store, clientCode, id)
      const refusal = readRefusal(operations, grant, clientCode, new Set(records.map((r) => r.kind)))
      if (refusal) throw refusal
      return batchView(batch, records, docsUrl)
    },

    /**
     * A page of the batches this grant may read, newest first, each exactly as its GET shows it (docs/decisions.md,
     * "Lists"): those whose every record kind it may write, filtered before the page is cut, so a batch it may not
     * read is never shown, never counted and never named by a cursor. A grant that may write no kind a batch can
     * carry could read no batch at all: 403, as the GET answers it for an unknown batch.
     */
    async list(clientCode: string, grant: Grant, q: BatchListQuery) {
      const kinds = (Object.keys(operations) as RecordKind[]).filter((k) =>
        scopesForKinds(operations, [k]).every((s) => grant.scopes.has(s)),
      )
      if (kinds.length === 0) {
        throw new Problem(
          'client_scope_denied',
          `The grant for client ${clientCode} may not list batches: reading a batch needs the write scope of every record kind it holds, and this grant holds none of ${allBatchScopes.join(', ')}.`,
        )
      }
      const after = readNewestFirstCursor('batches', q.cursor)
      const all = kinds.length === Object.keys(operations).length
      const rows = await listBatches(store, clientCode, { after, status: q.status, kinds: all ? undefined : kinds, limit: q.limit + 1 })
      const { page, nextCursor } = newestFirstPage('batches', rows, q.limit, (r) => r.external_batch_id)
      const records = await batchRecordsOf(
        store,
        clientCode,
        page.map((b) => b.external_batch_id),
      )
      return { data: page.map((b) => batchView(b, records.get(b.external_batch_id) ?? [], docsUrl)), nextCursor }
    },
  }
}

export type BatchService = ReturnType<typeof createBatchService>
