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

/**
 * Records that the Source was heard from, in one statement. A write that makes a stale client fresh (any write on
 * a `transaction` connection; a snapshot on a `snapshot_only` one) flips the recorded freshness: returns true then,
 * and the caller gives the client's Receivables their new revisions (their `source_stale` hold disappeared).
 */
export async function writeSourceActivity(tx: Tx, clientCode: string, t: SourceTouch): Promise<boolean> {
  const makesFresh = t.feedMode === 'transaction' || t.snapshotPosition !== undefined
  const rows = await tx.query<{ was_stale: boolean | null }>(
    `INSERT INTO source_activity (client_code, feed_mode, last_received_at, last_snapshot_at, last_source_position, stale_recorded, stale_before)
     VALUES ($1, $2, $3, CASE WHEN $4::bigint IS NULL THEN NULL ELSE $3::timestamptz END, $4, NOT $5::boolean, NULL)
     ON CONFLICT (client_code) DO UPDATE SET
       feed_mode = $2,
       last_received_at = GREATEST(source_activity.last_received_at, $3),
       last_snapshot_at = CASE WHEN $4::bigint IS NULL THEN source_activity.last_snapshot_at ELSE $3::timestamptz END,
       last_source_position = COALESCE($4, source_activity.last_source_position),
       stale_recorded = source_activity.stale_recorded AND NOT $5::boolean,
       stale_before = source_activity.stale_recorded
     RETURNING stale_before AS was_stale`,
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
