import { z } from 'zod'
import type { Clock } from '../../domain/time.ts'
import { Timestamp } from '../../domain/time.ts'
import type { Queryable, Store } from '../../store/store.ts'
import type { ClientFactStore } from '../holds/client-facts-store.ts'
import {
  allSourceActivity,
  lockSourceActivity,
  readSourceActivity,
  type SourceActivity,
  setStaleRecorded,
} from '../holds/source-activity-store.ts'
import { inUnitOfWork } from '../unit-of-work.ts'

/**
 * Source freshness: how recently the Source was heard from. A `transaction` connection streams changes,
 * so it is judged by its last accepted write; a `snapshot_only` connection by its last balance snapshot.
 * Thresholds are configuration (FRESHNESS_STALE_AFTER_TRANSACTION_SECONDS, FRESHNESS_STALE_AFTER_SNAPSHOT_SECONDS).
 */
export interface FreshnessThresholds {
  transactionSeconds: number
  snapshotSeconds: number
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

export interface FreshnessDeps {
  clock: Clock
  thresholds: FreshnessThresholds
  clientFacts: Pick<ClientFactStore, 'recordClientFact'>
  /** Called after a flip committed (the client fan-out worker's wake-up). */
  onFact?: () => void
}

export function createFreshness({ clock, thresholds, clientFacts, onFact }: FreshnessDeps) {
  const { recordClientFact } = clientFacts
  /**
   * The sweeper: flips the recorded freshness of every client whose Source went quiet past its threshold
   * (or came back within it after a configuration change), each client in its own transaction. A flip records
   * one client fact; the Receivables' new revisions and events follow in the background
   * (src/workers/client-fanout.ts). Any instance may run it; FOR UPDATE SKIP LOCKED keeps two sweepers off the
   * same client. Returns how many clients it flipped.
   */
  async function sweep(store: Store): Promise<number> {
    const candidates = await allSourceActivity(store)
    let flipped = 0
    for (const c of candidates) {
      if ((evaluate(c, c.feed_mode).state === 'stale') === c.stale_recorded) continue
      if (await sweepClient(store, c.client_code)) flipped++
    }
    return flipped
  }

  /** One client: flips its recorded freshness if the clock says it changed; true when it did. */
  async function sweepClient(store: Store, clientCode: string): Promise<boolean> {
    const flipped = await inUnitOfWork(store, async ({ tx }) => {
      const row = await lockSourceActivity(tx, clientCode)
      if (!row) return false
      const stale = evaluate(row, row.feed_mode).state === 'stale'
      if (stale === row.stale_recorded) return false
      await setStaleRecorded(tx, clientCode, stale)
      await recordClientFact(
        tx,
        clientCode,
        { kind: stale ? 'source_stale' : 'source_fresh', sourceStaleBefore: row.stale_recorded },
        clock.now().toISOString(),
      )
      return true
    })
    if (flipped) onFact?.()
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
    sweepClient,
    async read(db: Queryable, clientCode: string, feedMode: 'transaction' | 'snapshot_only') {
      return evaluate(await readSourceActivity(db, clientCode), feedMode)
    },
  }
}

export type Freshness = ReturnType<typeof createFreshness>
