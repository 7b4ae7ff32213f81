import { z } from 'zod'
import type { Clock } from '../../domain/time.ts'
import { Timestamp } from '../../domain/time.ts'
import type { Queryable, Tx } from '../../store/store.ts'

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
  .meta({ id: 'SourceFreshness' })

const touched = new WeakMap<Tx, Map<string, { feedMode: string; now: string }>>()

/**
 * Records that the Source was heard from (every accepted Source write, route or batch record). Written
 * once per transaction and client, just before COMMIT, with the latest time: a batch chunk of 25 records
 * touches the row once, and holds its lock only for the commit.
 */
export function touchSourceActivity(tx: Tx, clientCode: string, feedMode: string, now: string): void {
  let pending = touched.get(tx)
  if (!pending) {
    const created = new Map<string, { feedMode: string; now: string }>()
    touched.set(tx, created)
    pending = created
    tx.beforeCommit(async () => {
      for (const [client, t] of created) {
        await tx.query(
          `INSERT INTO source_activity (client_code, feed_mode, last_received_at) VALUES ($1, $2, $3)
           ON CONFLICT (client_code) DO UPDATE SET feed_mode = $2, last_received_at = GREATEST(source_activity.last_received_at, $3)`,
          [client, t.feedMode, t.now],
        )
      }
    })
  }
  pending.set(clientCode, { feedMode, now })
}

export async function recordSnapshotActivity(tx: Tx, clientCode: string, feedMode: string, position: number, now: string): Promise<void> {
  await tx.query(
    `INSERT INTO source_activity (client_code, feed_mode, last_received_at, last_snapshot_at, last_source_position) VALUES ($1, $2, $3, $3, $4)
     ON CONFLICT (client_code) DO UPDATE SET feed_mode = $2, last_received_at = GREATEST(source_activity.last_received_at, $3),
       last_snapshot_at = $3, last_source_position = $4`,
    [clientCode, feedMode, now, position],
  )
}

export function createFreshness({ clock, thresholds }: { clock: Clock; thresholds: FreshnessThresholds }) {
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
    /** Whether the client's Source is stale now (the `source_stale` hold of all its Receivables). */
    async staleFor(db: Queryable, clientCode: string): Promise<boolean> {
      const rows = await db.query<SourceActivity>('SELECT * FROM source_activity WHERE client_code = $1', [clientCode])
      return evaluate(rows[0], rows[0]?.feed_mode ?? 'transaction').state === 'stale'
    },
    async read(db: Queryable, clientCode: string, feedMode: 'transaction' | 'snapshot_only') {
      const rows = await db.query<SourceActivity>('SELECT * FROM source_activity WHERE client_code = $1', [clientCode])
      return evaluate(rows[0], feedMode)
    },
  }
}

export type Freshness = ReturnType<typeof createFreshness>
