import { canonicalDigest } from '../../domain/canonical.ts'
import { Problem } from '../../domain/problems.ts'
import type { Scope } from '../../domain/scopes.ts'
import { type Clock, isoNow } from '../../domain/time.ts'
import type { Grant } from '../../http/auth.ts'
import { lockIdentity } from '../../store/locks.ts'
import type { Queryable, Store } from '../../store/store.ts'
import type { RecordKind, WriteOperation } from '../operations.ts'
import type { BatchResponse, BatchWrite } from './schema.ts'
import { type BatchRecordRow, type BatchRow, batchRecords, findBatch, insertBatch } from './store.ts'

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

export function batchView(batch: BatchRow, records: Omit<BatchRecordRow, 'body'>[], docsUrl: string): BatchResponse {
  const counts = { total: records.length, pending: 0, succeeded: 0, failed: 0, dependencyFailed: 0 }
  for (const r of records) {
    if (r.status === 'dependency_failed') counts.dependencyFailed++
    else counts[r.status]++
  }
  return {
    externalBatchId: batch.external_batch_id,
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
      ...(r.problem_code ? { problem: { type: `${docsUrl}/problems/${r.problem_code}` } } : {}),
      ...(r.blocked_by ? { blockedBy: r.blocked_by } : {}),
    })),
  }
}

export function createBatchService({ store, clock, operations, docsUrl, onQueued }: BatchServiceDeps) {
  async function load(db: Queryable, clientCode: string, id: string) {
    const batch = await findBatch(db, clientCode, id)
    if (!batch) throw new Problem('batch_not_found', `No batch ${id} for this client.`)
    return { batch, records: await batchRecords(db, clientCode, id) }
  }

  return {
    /** 202 with the queued batch; 200 with its current state on an identical retry; 409 for a different body. */
    async submit(clientCode: string, grant: Grant, id: string, body: BatchWrite): Promise<{ status: 200 | 202; body: BatchResponse }> {
      const digest = canonicalDigest(body)
      const result = await store.transaction(async (tx) => {
        await lockIdentity(tx, clientCode, 'batch', id)
        const existing = await findBatch(tx, clientCode, id)
        if (existing) {
          if (existing.body_digest !== digest) {
            throw new Problem('batch_conflict', `Batch ${id} already holds a different submission.`)
          }
          const { batch, records } = await load(tx, clientCode, id)
          return { status: 200 as const, body: batchView(batch, records, docsUrl) }
        }
        await insertBatch(tx, clientCode, id, grant.integrationId, digest, body, isoNow(clock))
        const { batch, records } = await load(tx, clientCode, id)
        return { status: 202 as const, body: batchView(batch, records, docsUrl) }
      })
      if (result.status === 202) onQueued?.()
      return result
    },

    async get(clientCode: string, id: string, requireScopes: (s: Scope[]) => void): Promise<BatchResponse> {
      const { batch, records } = await load(store, clientCode, id)
      requireScopes(scopesForKinds(operations, new Set(records.map((r) => r.kind))))
      return batchView(batch, records, docsUrl)
    },
  }
}

export type BatchService = ReturnType<typeof createBatchService>
