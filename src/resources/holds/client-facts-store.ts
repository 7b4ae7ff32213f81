import type { Queryable, Tx } from '../../store/store.ts'
import type { ChangeInput } from '../feed/store.ts'

/**
 * Client-wide facts: a change of state every Receivable of a client shares (collection enabled or not, Source
 * fresh or stale). The change records one fact in its own transaction; the Receivables' new revisions and
 * `receivable.updated` events follow in the background, in chunks (src/workers/client-fanout.ts).
 * docs/decisions.md, "Client-wide changes in the background", states the rules.
 */
export type ClientFactKind = 'collection_enabled' | 'collection_disabled' | 'source_fresh' | 'source_stale'

export interface ClientFact {
  kind: ClientFactKind
  /** The client-wide state just before the fact; omitted, the part this fact does not change is read now. */
  collectionEnabledBefore?: boolean
  sourceStaleBefore?: boolean
}

/**
 * Records a fact: two statements. The first takes the next number under the client's head row lock (so facts
 * are numbered in commit order); the second, run after that lock was granted and so reading what committed
 * before it, stores the state just before the fact (the part this fact does not change is read from the
 * live client-wide state) and makes sure the client has a fan-out row. Returns the fact's number.
 */
export async function recordClientFact(tx: Tx, clientCode: string, fact: ClientFact, at: string): Promise<number> {
  const head = await tx.query<{ last_seq: string }>(
    `INSERT INTO client_fact_heads (client_code, last_seq) VALUES ($1, 1)
     ON CONFLICT (client_code) DO UPDATE SET last_seq = client_fact_heads.last_seq + 1
     RETURNING last_seq`,
    [clientCode],
  )
  const seq = Number(head[0]?.last_seq)
  await tx.query(
    `WITH f AS (
       INSERT INTO client_facts (client_code, seq, kind, collection_enabled_before, source_stale_before, recorded_at)
       SELECT $1, $2, $3,
              COALESCE($4::boolean, (SELECT collection_enabled FROM clients WHERE client_code = $1), false),
              COALESCE($5::boolean, (SELECT stale_recorded FROM source_activity WHERE client_code = $1), true),
              $6)
     INSERT INTO client_fanouts (client_code) VALUES ($1) ON CONFLICT (client_code) DO NOTHING`,
    [clientCode, seq, fact.kind, fact.collectionEnabledBefore ?? null, fact.sourceStaleBefore ?? null, at],
  )
  return seq
}

/**
 * The `source_fresh` fact of a touch that flipped a stale client fresh (writeSourceActivity, sent just before in the
 * same transaction, took its number): stores it, with the collection state read now, after the head's lock was
 * granted, and makes sure the client has a fan-out row. Does nothing when the touch did not flip, so it is sent with
 * the touch, before its answer (src/resources/unit-of-work.ts).
 */
export async function recordSourceFreshFact(tx: Tx, clientCode: string, at: string): Promise<void> {
  await tx.query(
    `WITH f AS (
       INSERT INTO client_facts (client_code, seq, kind, collection_enabled_before, source_stale_before, recorded_at)
       SELECT $1, h.last_seq, 'source_fresh', COALESCE((SELECT collection_enabled FROM clients WHERE client_code = $1), false), true, $2
         FROM source_activity s JOIN client_fact_heads h ON h.client_code = $1
        WHERE s.client_code = $1 AND s.stale_before AND NOT s.stale_recorded
       RETURNING client_code
     )
     INSERT INTO client_fanouts (client_code) SELECT client_code FROM f ON CONFLICT (client_code) DO NOTHING`,
    [clientCode, at],
    { prepared: true },
  )
}

/** A client's fan-out, claimed for one chunk transaction (its row stays locked until that transaction ends). */
export interface ClaimedFanout {
  client_code: string
  done_seq: string
  target_seq: string
  after_id: string | null
  reached: string
  failed_attempts: number
  last_seq: string
  /** When the fact this chunk's pass targets was recorded: the time of the revisions it gives. */
  target_recorded_at: string | null
}

/**
 * The clients whose fan-out is due now, most overdue first (at most `limit`): the worker's search for work, read
 * only and across clients (docs/scaling.md, "Exceptions"); each is then claimed on its own (claimFanout).
 */
export async function dueFanoutClients(db: Queryable, limit: number): Promise<string[]> {
  const rows = await db.query<{ client_code: string }>(
    `SELECT f.client_code FROM client_fanouts f JOIN client_fact_heads h ON h.client_code = f.client_code
      WHERE f.done_seq < h.last_seq AND f.next_attempt_at <= clock_timestamp()
      ORDER BY f.next_attempt_at, f.client_code
      LIMIT $1`,
    [limit],
  )
  return rows.map((r) => r.client_code)
}

/**
 * The client's fan-out when it has not reached its last fact and is due now, row-locked: SKIP LOCKED leaves a
 * client another worker is on to that worker (undefined then, as when nothing is due).
 */
export async function claimFanout(tx: Tx, clientCode: string): Promise<ClaimedFanout | undefined> {
  return (
    await tx.query<ClaimedFanout>(
      `SELECT f.client_code, f.done_seq, f.target_seq, f.after_id, f.reached, f.failed_attempts, h.last_seq,
              (SELECT recorded_at FROM client_facts x
                WHERE x.client_code = $1
                  AND x.seq = CASE WHEN f.target_seq > f.done_seq THEN f.target_seq ELSE h.last_seq END) AS target_recorded_at
         FROM client_fanouts f JOIN client_fact_heads h ON h.client_code = f.client_code
        WHERE f.client_code = $1 AND h.client_code = $1 AND f.done_seq < h.last_seq AND f.next_attempt_at <= clock_timestamp()
        FOR UPDATE OF f SKIP LOCKED`,
      [clientCode],
    )
  )[0]
}

/**
 * Is there any fan-out left at all, due or backing off: of one client, or (no client: tests and tools waiting for
 * every fan-out to end, read only across clients) of any.
 */
export async function fanoutPending(db: Queryable, clientCode?: string): Promise<boolean> {
  const rows =
    clientCode === undefined
      ? await db.query<{ pending: boolean }>(
          `SELECT EXISTS (SELECT 1 FROM client_fanouts f JOIN client_fact_heads h ON h.client_code = f.client_code
                           WHERE f.done_seq < h.last_seq) AS pending`,
        )
      : await db.query<{ pending: boolean }>(
          `SELECT EXISTS (SELECT 1 FROM client_fanouts f JOIN client_fact_heads h ON h.client_code = f.client_code
                           WHERE f.client_code = $1 AND h.client_code = $1 AND f.done_seq < h.last_seq) AS pending`,
          [clientCode],
        )
  return rows[0]?.pending === true
}

/**
 * One chunk of a pass, in one statement: the next `limit` Receivables after `afterId` (id order) that have not
 * reached `target`, skipping any a write holds locked now (that write brings it up to date itself, or, rolled
 * back, leaves it to a later pass), each given a new revision that includes every fact up to `target`. Returns
 * their events in id order and the last id; fewer than `limit` events: the pass reached the end.
 */
export async function advanceReceivables(
  tx: Tx,
  clientCode: string,
  afterId: string,
  target: number,
  limit: number,
  at: string,
): Promise<{ events: ChangeInput[]; lastId: string | undefined }> {
  const rows = await tx.query<{ external_receivable_id: string; revision: string }>(
    `WITH pick AS (
       SELECT external_receivable_id FROM receivables
        WHERE client_code = $1 AND external_receivable_id > $2 AND client_fact_seq < $3
        ORDER BY external_receivable_id
        LIMIT $4
        FOR UPDATE SKIP LOCKED),
     u AS (
       UPDATE receivables r SET revision = r.revision + 1, client_fact_seq = $3, updated_at = GREATEST(r.updated_at, $5::timestamptz)
         FROM pick
        WHERE r.client_code = $1 AND r.external_receivable_id = pick.external_receivable_id
       RETURNING r.external_receivable_id, r.revision)
     SELECT external_receivable_id, revision FROM u ORDER BY external_receivable_id`,
    [clientCode, afterId, target, limit, at],
  )
  return {
    events: rows.map((r) => ({
      type: 'receivable.updated' as const,
      resourceType: 'receivable' as const,
      resourceId: r.external_receivable_id,
      revision: Number(r.revision),
      occurredAt: at,
    })),
    lastId: rows.at(-1)?.external_receivable_id,
  }
}

/** Receivables of the client that have not reached `target` (those a write held locked during the pass). */
export async function receivablesBehind(tx: Tx, clientCode: string, target: number): Promise<number> {
  const rows = await tx.query<{ n: string }>('SELECT count(*) AS n FROM receivables WHERE client_code = $1 AND client_fact_seq < $2', [
    clientCode,
    target,
  ])
  return Number(rows[0]?.n ?? 0)
}

/** Progress of the claimed fan-out, committed with the chunk it describes. */
export async function saveFanoutProgress(
  tx: Tx,
  clientCode: string,
  p: { targetSeq: number; afterId: string | null; reached: number; doneSeq?: number; retryInMs?: number },
): Promise<void> {
  await tx.query(
    `UPDATE client_fanouts SET target_seq = $2, after_id = $3, reached = $4, done_seq = COALESCE($5, done_seq),
            failed_attempts = 0, last_error = NULL,
            next_attempt_at = clock_timestamp() + make_interval(secs => COALESCE($6::int, 0) / 1000.0),
            updated_at = clock_timestamp()
      WHERE client_code = $1`,
    [clientCode, p.targetSeq, p.afterId, p.reached, p.doneSeq ?? null, p.retryInMs ?? null],
  )
  // Facts every Receivable has passed are no longer read by anyone (the hold view reads the fact after a
  // Receivable's own, and no Receivable is before `done`).
  if (p.doneSeq !== undefined) await tx.query('DELETE FROM client_facts WHERE client_code = $1 AND seq <= $2', [clientCode, p.doneSeq])
}

/** A chunk that failed (rolled back): counted, kept in `last_error`, retried after a back-off. */
export async function recordFanoutFailure(db: Queryable, clientCode: string, error: string): Promise<void> {
  // 1 s, 2 s, 4 s ... at most 5 minutes: a database that cannot take the chunk now is not hammered.
  await db.query(
    `UPDATE client_fanouts SET failed_attempts = failed_attempts + 1, last_error = $2,
            next_attempt_at = clock_timestamp() + make_interval(secs => LEAST(power(2, failed_attempts), 300))
      WHERE client_code = $1`,
    [clientCode, error.slice(0, 500)],
  )
}

/** Where each client's fan-out stands (operators, tests). */
export async function fanoutStatus(db: Queryable, clientCode: string) {
  return (
    await db.query<{
      last_seq: string
      done_seq: string
      target_seq: string
      after_id: string | null
      reached: string
      failed_attempts: number
      last_error: string | null
    }>(
      `SELECT h.last_seq, f.done_seq, f.target_seq, f.after_id, f.reached, f.failed_attempts, f.last_error
         FROM client_fact_heads h JOIN client_fanouts f ON f.client_code = h.client_code WHERE h.client_code = $1 AND f.client_code = $1`,
      [clientCode],
    )
  )[0]
}

export const clientFactStore = { recordClientFact }
export type ClientFactStore = typeof clientFactStore

/**
 * Brings one Receivable up to the client's last fact now, inside the caller's transaction, instead of waiting
 * for the fan-out: for an action that must judge its holds as they are (a Payment request, a sandbox payment),
 * so a collection just disabled or a Source just gone stale stops it at once. The caller holds the
 * Receivable's identity lock. Returns its `receivable.updated` event (to append to the unit of work), or
 * nothing when it had already reached every fact.
 */
export async function catchUpReceivable(tx: Tx, clientCode: string, receivableId: string, at: string): Promise<ChangeInput | undefined> {
  const rows = await tx.query<{ revision: string }>(
    `UPDATE receivables r SET revision = r.revision + 1, client_fact_seq = h.last_seq, updated_at = GREATEST(r.updated_at, $3::timestamptz)
       FROM client_fact_heads h
      WHERE h.client_code = $1 AND r.client_code = $1 AND r.external_receivable_id = $2 AND r.client_fact_seq < h.last_seq
     RETURNING r.revision`,
    [clientCode, receivableId, at],
  )
  const row = rows[0]
  if (!row) return undefined
  return {
    type: 'receivable.updated',
    resourceType: 'receivable',
    resourceId: receivableId,
    revision: Number(row.revision),
    occurredAt: at,
  }
}
