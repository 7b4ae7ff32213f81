import type { NewestFirstKey } from '../../domain/cursor.ts'
import { leaseHolderGone } from '../../store/lease-holder.ts'
import { newestFirst } from '../../store/newest-first.ts'
import type { Queryable, Tx } from '../../store/store.ts'

export interface BatchRow {
  external_batch_id: string
  integration_id: string
  body_digest: string
  status: 'queued' | 'running' | 'succeeded' | 'partially_succeeded' | 'failed'
  submitted_at: string
  completed_at: string | null
}

export interface BatchRecordRow {
  position: number
  record_id: string
  kind: string
  external_id: string
  depends_on: string[]
  body: Record<string, unknown>
  status: 'pending' | 'succeeded' | 'failed' | 'dependency_failed'
  http_status: number | null
  problem_code: string | null
  /** What the synchronous route's problem said beyond its code: detail, errors[] and extension members. */
  problem: StoredProblem | null
  blocked_by: string | null
  /** On a record of a retry batch: the earlier batch and the record's position there (absent where not read). */
  retried_from_batch?: string | null
  retried_from_position?: number | null
}

export interface StoredProblem {
  detail: string
  errors?: { code: string; detail: string; pointer: string }[]
  extensions?: Record<string, unknown>
}

export async function findBatch(db: Queryable, clientCode: string, id: string): Promise<BatchRow | undefined> {
  return (
    await db.query<BatchRow>(
      `SELECT external_batch_id, integration_id, body_digest, status, submitted_at, completed_at
         FROM batches WHERE client_code = $1 AND external_batch_id = $2`,
      [clientCode, id],
    )
  )[0]
}

/** Outcomes only: the record bodies are the runner's business, not the read's. */
export async function batchRecords(db: Queryable, clientCode: string, id: string): Promise<Omit<BatchRecordRow, 'body'>[]> {
  return db.query<Omit<BatchRecordRow, 'body'>>(
    `SELECT position, record_id, kind, external_id, depends_on, status, http_status, problem_code, problem, blocked_by,
            retried_from_batch, retried_from_position
       FROM batch_records WHERE client_code = $1 AND external_batch_id = $2 ORDER BY position`,
    [clientCode, id],
  )
}

/**
 * A page of the client's batches, newest first by submission, optionally of one status, and only those all of
 * whose records are of `kinds` (undefined: any kind). An index range scan of batches_submitted or
 * batches_status_submitted; the kinds test probes batch_records by its primary key (at most 100 records a batch),
 * and only for a grant that may not write every kind.
 */
export async function listBatches(
  db: Queryable,
  clientCode: string,
  q: { after: NewestFirstKey | undefined; status: BatchRow['status'] | undefined; kinds: readonly string[] | undefined; limit: number },
): Promise<(BatchRow & { list_at: string })[]> {
  const params: unknown[] = [clientCode, q.limit]
  let filter = ''
  if (q.status !== undefined) {
    params.push(q.status)
    filter += ` AND b.status = $${params.length}`
  }
  if (q.kinds !== undefined) {
    params.push(q.kinds)
    filter += ` AND NOT EXISTS (SELECT 1 FROM batch_records r WHERE r.client_code = b.client_code AND r.external_batch_id = b.external_batch_id
                                   AND r.kind <> ALL($${params.length}::text[]))`
  }
  const page = newestFirst('b.submitted_at', 'b.external_batch_id', q.after, params)
  return db.query(
    `SELECT b.external_batch_id, b.integration_id, b.body_digest, b.status, b.submitted_at, b.completed_at, ${page.listAt}
       FROM batches b WHERE b.client_code = $1${filter}${page.where} ${page.order} LIMIT $2`,
    params,
  )
}

/** `batchRecords` of several batches, in one statement: batch id to its record outcomes in array order. */
export async function batchRecordsOf(
  db: Queryable,
  clientCode: string,
  ids: readonly string[],
): Promise<Map<string, Omit<BatchRecordRow, 'body'>[]>> {
  const rows = await db.query<Omit<BatchRecordRow, 'body'> & { external_batch_id: string }>(
    `SELECT external_batch_id, position, record_id, kind, external_id, depends_on, status, http_status, problem_code, problem, blocked_by,
            retried_from_batch, retried_from_position
       FROM batch_records WHERE client_code = $1 AND external_batch_id = ANY($2::text[]) ORDER BY external_batch_id, position`,
    [clientCode, ids],
  )
  const records = new Map<string, Omit<BatchRecordRow, 'body'>[]>()
  for (const { external_batch_id: id, ...record } of rows) {
    const list = records.get(id) ?? []
    list.push(record)
    records.set(id, list)
  }
  return records
}

/** A record as it is queued: a new batch's as submitted; a retry batch's with the earlier record it retries. */
export interface QueuedRecord {
  recordId: string
  kind: string
  externalId: string
  dependsOn?: readonly string[]
  body: unknown
  retriedFrom?: { externalBatchId: string; position: number }
}

/** The batch and all its records in one statement (records go in as one jsonb array, not a loop). */
export async function insertBatch(
  tx: Tx,
  clientCode: string,
  id: string,
  integrationId: string,
  digest: string,
  records: readonly QueuedRecord[],
  now: string,
) {
  await tx.query(
    `WITH b AS (
       INSERT INTO batches (client_code, external_batch_id, integration_id, body_digest, status, submitted_at)
       VALUES ($1, $2, $3, $4, 'queued', $5) RETURNING client_code, external_batch_id)
     INSERT INTO batch_records (client_code, external_batch_id, position, record_id, kind, external_id, depends_on, body, status,
                                retried_from_batch, retried_from_position)
     SELECT b.client_code, b.external_batch_id, r.ordinality, r.value->>'recordId', r.value->>'kind', r.value->>'externalId',
            ARRAY(SELECT jsonb_array_elements_text(COALESCE(r.value->'dependsOn', '[]'::jsonb))), r.value->'body', 'pending',
            r.value->'retriedFrom'->>'externalBatchId', (r.value->'retriedFrom'->>'position')::int
       FROM b, jsonb_array_elements($6::jsonb) WITH ORDINALITY AS r(value, ordinality)`,
    [clientCode, id, integrationId, digest, now, JSON.stringify(records)],
  )
}

/**
 * Every record of a batch in array order, as a retry needs them: kind and status of each (what reading the
 * batch needs), and the body only of those a retry takes (`failed`, `dependency_failed`).
 */
export async function recordsToRetry(
  db: Queryable,
  clientCode: string,
  id: string,
): Promise<Pick<BatchRecordRow, 'position' | 'record_id' | 'kind' | 'external_id' | 'depends_on' | 'status' | 'body'>[]> {
  return db.query(
    `SELECT position, record_id, kind, external_id, depends_on, status,
            CASE WHEN status IN ('failed', 'dependency_failed') THEN body END AS body
       FROM batch_records WHERE client_code = $1 AND external_batch_id = $2 ORDER BY position`,
    [clientCode, id],
  )
}

export interface ClaimedBatch {
  client_code: string
  external_batch_id: string
  integration_id: string
}

/** A batch is claimable: queued, or running with its lease free, and past its backoff (`b`: the alias). */
function claimable(b: string): string {
  return `(${b}.status = 'queued' OR (${b}.status = 'running' AND (${b}.lease_expires_at < clock_timestamp() OR ${leaseHolderGone(`${b}.lease_holder`)})))
      AND (${b}.next_attempt_at IS NULL OR ${b}.next_attempt_at <= clock_timestamp())`
}

/** How many clients one claim looks at, oldest claimable batch first (each is then claimed on its own). */
const CLAIM_CLIENTS = 8

/**
 * Claims the oldest queued batch, or a running one whose lease is free: expired (its worker gave it back after
 * a failed chunk or on stop, or stopped renewing it), or held by a holder whose lock is gone (a killed process, a
 * lost lock connection: src/store/lease-holder.ts), once its `next_attempt_at` (the backoff after a failed chunk)
 * has passed. The lease is written with `holder`, this instance's key (null: no holder, the lease only expires).
 *
 * Per client (docs/scaling.md): one read-only statement finds the clients with a claimable batch, by their oldest
 * one; then each is claimed with its client code, FOR UPDATE SKIP LOCKED within that client (a batch whose chunk
 * transaction is open elsewhere, or that another worker is claiming, is invisible here), so no two workers run
 * one batch; a client whose claimable batches were all taken meanwhile gives way to the next.
 */
export async function claimBatch(
  db: Queryable,
  token: string,
  leaseSeconds: number,
  runnerId: string,
  now: string,
  holder: number | null = null,
): Promise<ClaimedBatch | undefined> {
  const clients = await db.query<{ client_code: string }>(
    `SELECT b.client_code FROM batches b WHERE ${claimable('b')}
      GROUP BY b.client_code ORDER BY min(b.submitted_at), b.client_code LIMIT $1`,
    [CLAIM_CLIENTS],
  )
  for (const { client_code } of clients) {
    const claimed = (
      await db.query<ClaimedBatch>(
        `UPDATE batches b SET status = 'running', lease_token = $1, lease_expires_at = clock_timestamp() + make_interval(secs => $2),
                lease_holder = $5, started_at = COALESCE(b.started_at, $4), attempts = b.attempts + 1, runner_id = $3
          WHERE b.client_code = $6 AND b.external_batch_id = (
            SELECT c.external_batch_id FROM batches c WHERE c.client_code = $6 AND ${claimable('c')}
             ORDER BY c.submitted_at LIMIT 1 FOR UPDATE SKIP LOCKED)
          RETURNING b.client_code, b.external_batch_id, b.integration_id`,
        [token, leaseSeconds, runnerId, now, holder, client_code],
      )
    )[0]
    if (claimed) return claimed
  }
  return undefined
}

/**
 * Locks the batch row for this chunk's transaction, if the lease is still ours, and reads every record of the
 * batch in array order (the runner's view), in one statement. `failedAttempts` is how many chunks of this batch
 * failed in a row before this one (0 when the last chunk committed). Only pending records come with their body
 * (the others are never run again, and a body is the bulk of a row), and no record with its problem (outcomes
 * are only written here).
 */
export async function holdLease(
  tx: Tx,
  b: ClaimedBatch,
  token: string,
  leaseSeconds: number,
): Promise<{ failedAttempts: number; lastError: string | null; records: BatchRecordRow[] } | undefined> {
  const rows = await tx.query<{ failed_attempts: number; last_error: string | null } & BatchRecordRow>(
    `WITH lease AS (
       UPDATE batches SET lease_expires_at = clock_timestamp() + make_interval(secs => $4)
        WHERE client_code = $1 AND external_batch_id = $2 AND lease_token = $3 RETURNING failed_attempts, last_error)
     SELECT l.failed_attempts, l.last_error, r.position, r.record_id, r.kind, r.external_id, r.depends_on,
            CASE WHEN r.status = 'pending' THEN r.body END AS body, r.status, r.http_status, r.problem_code, NULL AS problem,
            r.blocked_by
       FROM lease l
       LEFT JOIN batch_records r ON r.client_code = $1 AND r.external_batch_id = $2
      ORDER BY r.position`,
    [b.client_code, b.external_batch_id, token, leaseSeconds],
  )
  const first = rows[0]
  if (!first) return undefined
  const records = rows
    .filter((r) => r.position !== null)
    .map(({ failed_attempts: _f, last_error: _l, ...record }) => record as BatchRecordRow)
  return { failedAttempts: Number(first.failed_attempts), lastError: first.last_error, records }
}

/** A chunk committed after failed ones: the count of failures in a row starts again (`last_error` stays). */
export async function clearChunkFailures(tx: Tx, b: ClaimedBatch) {
  await tx.query(`UPDATE batches SET failed_attempts = 0, next_attempt_at = NULL WHERE client_code = $1 AND external_batch_id = $2`, [
    b.client_code,
    b.external_batch_id,
  ])
}

/**
 * A chunk's transaction failed: count it, say why in `last_error`, and give the lease back with a backoff
 * (`next_attempt_at`): base × 2^(failures in a row − 1), at most `capMs`. Any instance may claim the batch
 * again after that. Returns the failures in a row, or undefined when the lease was no longer ours.
 */
export async function recordChunkFailure(
  db: Queryable,
  b: ClaimedBatch,
  token: string,
  error: string,
  backoff: { baseMs: number; capMs: number },
): Promise<number | undefined> {
  const rows = await db.query<{ failed_attempts: number }>(
    `UPDATE batches SET failed_attempts = failed_attempts + 1, last_error = $4, lease_token = NULL,
            lease_expires_at = clock_timestamp(),
            next_attempt_at = clock_timestamp()
              + make_interval(secs => least($6::float8, $5::float8 * power(2, least(failed_attempts, 40))) / 1000)
      WHERE client_code = $1 AND external_batch_id = $2 AND lease_token = $3
      RETURNING failed_attempts`,
    [b.client_code, b.external_batch_id, token, error, backoff.baseMs, backoff.capMs],
  )
  const row = rows[0]
  return row ? Number(row.failed_attempts) : undefined
}

export interface RecordOutcome {
  position: number
  status: 'succeeded' | 'failed' | 'dependency_failed'
  httpStatus: number | null
  problemCode: string | null
  problem: StoredProblem | null
  blockedBy: string | null
}

export async function saveOutcomes(tx: Tx, b: ClaimedBatch, outcomes: RecordOutcome[]) {
  if (outcomes.length === 0) return
  // jsonb travels as text[] (one JSON document or NULL per record) and is cast per row: an array of jsonb
  // parameters would need the driver to quote JSON inside an array literal.
  await tx.query(
    `UPDATE batch_records r SET status = o.status, http_status = o.http_status, problem_code = o.problem_code,
            problem = o.problem::jsonb, blocked_by = o.blocked_by
       FROM unnest($3::int[], $4::text[], $5::int[], $6::text[], $7::text[], $8::text[])
            AS o(position, status, http_status, problem_code, problem, blocked_by)
      WHERE r.client_code = $1 AND r.external_batch_id = $2 AND r.position = o.position`,
    [
      b.client_code,
      b.external_batch_id,
      outcomes.map((o) => o.position),
      outcomes.map((o) => o.status),
      outcomes.map((o) => o.httpStatus),
      outcomes.map((o) => o.problemCode),
      outcomes.map((o) => (o.problem ? JSON.stringify(o.problem) : null)),
      outcomes.map((o) => o.blockedBy),
    ],
  )
}

export async function completeBatch(tx: Tx, b: ClaimedBatch, status: BatchRow['status'], now: string) {
  await tx.query(
    `UPDATE batches SET status = $3, completed_at = $4, lease_token = NULL, lease_expires_at = NULL
      WHERE client_code = $1 AND external_batch_id = $2`,
    [b.client_code, b.external_batch_id, status, now],
  )
}

/**
 * A stopping runner hands the rest of its batch to any instance now, rather than after the lease expires. Only
 * under its own token: a lease taken meanwhile by another instance is left alone.
 */
export async function handBackLease(db: Queryable, b: ClaimedBatch, token: string): Promise<void> {
  await db.query(
    'UPDATE batches SET lease_expires_at = clock_timestamp() WHERE client_code = $1 AND external_batch_id = $2 AND lease_token = $3',
    [b.client_code, b.external_batch_id, token],
  )
}
