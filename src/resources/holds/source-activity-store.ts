import type { Queryable, QueryOptions, Tx } from '../../store/store.ts'

/**
 * The write path's statements whose text never varies are prepared by name on each PostgreSQL connection
 * (`QueryOptions.prepared`): planned once per connection instead of at every run (docs/performance.md).
 */
const PREPARED: QueryOptions = { prepared: true }

export interface SourceActivity {
  feed_mode: 'transaction' | 'snapshot_only'
  last_received_at: string | null
  last_snapshot_at: string | null
  last_source_position: string | null
}

/** What a unit of work records of the Source being heard from (src/resources/unit-of-work.ts). */
export interface SourceTouch {
  feedMode: string
  now: string
  snapshotPosition?: number
}

/** Whether a touch can make a stale client fresh: any write on a `transaction` connection; a snapshot on a `snapshot_only` one. */
export function touchMakesFresh(t: SourceTouch): boolean {
  return t.feedMode === 'transaction' || t.snapshotPosition !== undefined
}

/**
 * Records that the Source was heard from, in one statement. A write that makes a stale client fresh
 * (`touchMakesFresh`) flips the recorded freshness, and the same statement then takes the client's next fact number
 * (client_fact_heads, under its row lock: facts are numbered in commit order); `recordSourceFreshFact`, sent right
 * after it, stores that fact. So the flip needs no answer before the statements after it, which can be sent with
 * it (docs/decisions.md, "A write in two round trips"). `stale_before` keeps, on the row this transaction holds
 * locked, whether this touch found the client stale. Returns true when it flipped.
 */
export async function writeSourceActivity(tx: Tx, clientCode: string, t: SourceTouch): Promise<boolean> {
  const makesFresh = touchMakesFresh(t)
  const rows = await tx.query<{ was_stale: boolean | null }>(
    `WITH touched AS (
       INSERT INTO source_activity (client_code, feed_mode, last_received_at, last_snapshot_at, last_source_position, stale_recorded, stale_before)
       VALUES ($1, $2, $3, CASE WHEN $4::bigint IS NULL THEN NULL ELSE $3::timestamptz END, $4, NOT $5::boolean, NULL)
       ON CONFLICT (client_code) DO UPDATE SET
         feed_mode = $2,
         last_received_at = GREATEST(source_activity.last_received_at, $3),
         last_snapshot_at = CASE WHEN $4::bigint IS NULL THEN source_activity.last_snapshot_at ELSE $3::timestamptz END,
         last_source_position = COALESCE($4, source_activity.last_source_position),
         stale_recorded = source_activity.stale_recorded AND NOT $5::boolean,
         stale_before = source_activity.stale_recorded
       RETURNING stale_before
     ), fact_head AS (
       INSERT INTO client_fact_heads (client_code, last_seq)
       SELECT $1, 1 FROM touched WHERE $5::boolean AND touched.stale_before
       ON CONFLICT (client_code) DO UPDATE SET last_seq = client_fact_heads.last_seq + 1
       RETURNING last_seq
     )
     SELECT stale_before AS was_stale FROM touched`,
    [clientCode, t.feedMode, t.now, t.snapshotPosition ?? null, makesFresh],
    PREPARED,
  )
  return makesFresh && rows[0]?.was_stale === true
}

export async function readSourceActivity(db: Queryable, clientCode: string): Promise<SourceActivity | undefined> {
  return (await db.query<SourceActivity>('SELECT * FROM source_activity WHERE client_code = $1', [clientCode]))[0]
}

/** Every client's activity and recorded freshness: the sweeper's candidates. */
export async function allSourceActivity(db: Queryable) {
  return db.query<SourceActivity & { client_code: string; stale_recorded: boolean }>(
    'SELECT client_code, feed_mode, last_received_at, last_snapshot_at, last_source_position, stale_recorded FROM source_activity',
  )
}

/** One client's activity, row-locked, or undefined when another sweeper holds it (SKIP LOCKED). */
export async function lockSourceActivity(tx: Tx, clientCode: string) {
  return (
    await tx.query<SourceActivity & { stale_recorded: boolean }>(
      `SELECT feed_mode, last_received_at, last_snapshot_at, last_source_position, stale_recorded
         FROM source_activity WHERE client_code = $1 FOR UPDATE SKIP LOCKED`,
      [clientCode],
    )
  )[0]
}

export async function setStaleRecorded(tx: Tx, clientCode: string, stale: boolean): Promise<void> {
  await tx.query('UPDATE source_activity SET stale_recorded = $2 WHERE client_code = $1', [clientCode, stale])
}
