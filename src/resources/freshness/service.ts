import { z } from 'zod'
import type { Clock } from '../../domain/time.ts'
import { Timestamp } from '../../domain/time.ts'
import type { Queryable, Store, Tx } from '../../store/store.ts'
import { receivablesChangedIn } from '../changes/store.ts'
import { recordReceivableChanges } from '../receivables/store.ts'

/**
 * Source freshness: how recently the Source was heard from. A `transaction` connection streams changes,
 * so it is judged by its last accepted write; a `snapshot_only` connection by its last balance snapshot.
 * Thresholds are configuration (FRESHNESS_STALE_AFTER_TRANSACTION_SECONDS, FRESHNESS_STALE_AFTER_SNAPSHOT_SECONDS).
 */
export interface FreshnessThresholds {
  transactionSeconds: number
  snapshotSeconds: number
}

export interface SourceActivity {
  feed_mode: 'transaction' | 'snapshot_only'
  last_received_at: string | null
  last_snapshot_at: string | null
  last_source_position: string | null
}

export const SourceFreshness = z
  .object({
    state: z.enum(['fresh', 'stale']),
    feedMode: z.enum(['transaction', 'snapshot_only']),
    lastReceivedAt: Timestamp.nullable(),
    lastSnapshotAt: Timestamp.nullable(),
    lastSourcePosition: z.number().int().nullable(),
    staleAfterSeconds: z.number().int(),
  })
  .meta({
    id: 'SourceFreshness',
    examples: [
      {
        state: 'fresh',
        feedMode: 'transaction',
        lastReceivedAt: '2026-02-11T06:00:02.771Z',
        lastSnapshotAt: '2026-02-11T06:00:02.771Z',
        lastSourcePosition: 1300,
        staleAfterSeconds: 172800,
      },
    ],
  })

interface Touch {
  feedMode: string
  now: string
  snapshotPosition?: number
}

const touched = new WeakMap<Tx, Map<string, Touch>>()

/**
 * Records that the Source was heard from: every accepted Source write (route or batch record), and balance
 * snapshots with their position. Written once per transaction and client, just before COMMIT.
 *
 * A write that makes a stale client fresh (any write on a `transaction` connection; a snapshot on a
 * `snapshot_only` one) flips the recorded freshness in the same transaction, and every Receivable whose
 * `source_stale` hold thereby disappears gets a new revision and a change event (those already changed
 * by this transaction carry the change in their own new revision).
 */
export function touchSourceActivity(tx: Tx, clientCode: string, feedMode: string, now: string, snapshotPosition?: number): void {
  let pending = touched.get(tx)
  if (!pending) {
    const created = new Map<string, Touch>()
    touched.set(tx, created)
    pending = created
    tx.beforeCommit(async () => {
      for (const [client, t] of created) await writeActivity(tx, client, t)
    })
  }
  const previous = pending.get(clientCode)
  const snapshot = snapshotPosition ?? previous?.snapshotPosition
  pending.set(clientCode, { feedMode, now, ...(snapshot !== undefined ? { snapshotPosition: snapshot } : {}) })
}

async function writeActivity(tx: Tx, clientCode: string, t: Touch): Promise<void> {
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
  )
  if (makesFresh && rows[0]?.was_stale === true)
    // A change of the client-wide source_stale hold is a change of each of its Receivables.
    await recordReceivableChanges(tx, clientCode, { allExcept: [...receivablesChangedIn(tx, clientCode)] }, t.now)
}

export function createFreshness({ clock, thresholds }: { clock: Clock; thresholds: FreshnessThresholds }) {
  /**
   * The sweeper: flips the recorded freshness of every client whose Source went quiet past its threshold
   * (or came back within it after a configuration change), each client in its own transaction, bumping
   * its Receivables' revisions with change events. Any instance may run it; FOR UPDATE SKIP LOCKED keeps
   * two sweepers off the same client.
   */
  async function sweep(store: Store): Promise<number> {
    const candidates = await store.query<SourceActivity & { client_code: string; stale_recorded: boolean }>(
      'SELECT client_code, feed_mode, last_received_at, last_snapshot_at, last_source_position, stale_recorded FROM source_activity',
    )
    let flipped = 0
    for (const c of candidates) {
      if ((evaluate(c, c.feed_mode).state === 'stale') === c.stale_recorded) continue
      await store.transaction(async (tx) => {
        const locked = await tx.query<SourceActivity & { stale_recorded: boolean }>(
          `SELECT feed_mode, last_received_at, last_snapshot_at, last_source_position, stale_recorded
             FROM source_activity WHERE client_code = $1 FOR UPDATE SKIP LOCKED`,
          [c.client_code],
        )
        const row = locked[0]
        if (!row) return
        const stale = evaluate(row, row.feed_mode).state === 'stale'
        if (stale === row.stale_recorded) return
        await tx.query('UPDATE source_activity SET stale_recorded = $2 WHERE client_code = $1', [c.client_code, stale])
        await recordReceivableChanges(tx, c.client_code, { allExcept: [] }, clock.now().toISOString())
        flipped++
      })
    }
    return flipped
  }

  function evaluate(activity: SourceActivity | undefined, feedMode: 'transaction' | 'snapshot_only') {
    const staleAfterSeconds = feedMode === 'snapshot_only' ? thresholds.snapshotSeconds : thresholds.transactionSeconds
    const reference = feedMode === 'snapshot_only' ? activity?.last_snapshot_at : activity?.last_received_at
    const stale = !reference || clock.now().getTime() - Date.parse(reference) > staleAfterSeconds * 1000
    return {
      state: stale ? ('stale' as const) : ('fresh' as const),
      feedMode,
      lastReceivedAt: activity?.last_received_at ?? null,
      lastSnapshotAt: activity?.last_snapshot_at ?? null,
      lastSourcePosition: activity?.last_source_position ? Number(activity.last_source_position) : null,
      staleAfterSeconds,
    }
  }
  return {
    evaluate,
    sweep,
    async read(db: Queryable, clientCode: string, feedMode: 'transaction' | 'snapshot_only') {
      const rows = await db.query<SourceActivity>('SELECT * FROM source_activity WHERE client_code = $1', [clientCode])
      return evaluate(rows[0], feedMode)
    },
  }
}

export type Freshness = ReturnType<typeof createFreshness>
