import type { Grant } from '../../access/grants.ts'
import { CHANGE_FEED, readCursor, seqCursor } from '../../domain/cursor.ts'
import { Problem } from '../../domain/problems.ts'
import { type Clock, isoNow } from '../../domain/time.ts'
import type { Store } from '../../store/store.ts'
import { NO_SLOT, type SlotRelease } from '../../store/transactions.ts'
import { purgedThrough } from '../changes/store.ts'
import type { ResourceType } from '../feed/store.ts'
import { defineOperation, executeWrite } from '../operations.ts'
import { MANAGE } from './endpoint-service.ts'
import { answer, enabledEndpoint } from './endpoint-shared.ts'
import { NoBody, ReplayChunk } from './schema.ts'
import { readableTypes } from './secrets.ts'
import { replayDeliveries } from './store.ts'

/**
 * Feed events a replay queues per transaction. Measured on PGlite (bench/replay-probe.ts; docs/decisions.md, "Leases
 * tied to their holder; replay in chunks"): a chunk of 500 holds the store for about 30 ms, where one statement for
 * 12,000 held it 0.45 to 0.7 s.
 */
export const REPLAY_CHUNK_SIZE = 500

/** Replay takes a change-feed cursor (from 0). */
const FeedCursor = seqCursor(0n)

/** A replay's progress across its chunks (one request): `throughSeq` fixed by the first, `last` set by the last. */
interface ReplayState {
  cursor: string
  afterSeq: string
  throughSeq: string | null
  types: ResourceType[]
  now: string
  last: boolean
}

/** Replays, for the endpoint's Integration: notifications queued again after a change-feed cursor. */
export function createReplayService({ store, clock }: { store: Store; clock: Clock }) {
  /**
   * One chunk of a replay (REPLAY_CHUNK_SIZE feed events), an operation of its own request: the first checks the
   * endpoint and the cursor and fixes the end (what the worker has scanned); `state.last` tells the request's
   * slot release whether this chunk is the last.
   */
  function replayChunkOperation(grant: Grant, state: ReplayState) {
    return defineOperation({
      kind: 'webhook_replay_chunk',
      scopes: MANAGE,
      body: NoBody,
      response: ReplayChunk,
      source: false,
      async run({ tx }) {
        if (state.throughSeq === null) {
          const endpoint = await enabledEndpoint(tx, grant)
          if (BigInt(state.cursor) < (await purgedThrough(tx, grant.clientCode))) {
            throw new Problem(
              'cursor_expired',
              'Events after this cursor were purged (kept 30 days); replay from a newer cursor and re-read the resources.',
            )
          }
          state.throughSeq = endpoint.scanned_seq
        }
        const c = await replayDeliveries(tx, grant.clientCode, grant.integrationId, {
          afterSeq: state.afterSeq,
          throughSeq: state.throughSeq,
          types: state.types,
          now: state.now,
          limit: REPLAY_CHUNK_SIZE,
        })
        state.last = c.lastSeq === null || c.events < REPLAY_CHUNK_SIZE
        return answer(200, { queued: c.queued, lastSeq: c.lastSeq })
      },
    })
  }

  return {
    /**
     * Queues again every notification after a change-feed cursor (of the types the grant may read), in chunks of
     * REPLAY_CHUNK_SIZE feed events, each its own write (`executeWrite`, the request's idiom), all before
     * answering: the 202's `queued` is exact, and between chunks every other request gets the store (on PGlite
     * one transaction excludes all others; docs/decisions.md, "replay in chunks"). A replay is bounded (the feed
     * keeps 30 days) but one transaction for it would hold PGlite for the whole of it. The first chunk checks the
     * endpoint and the cursor, and fixes the end; the last frees the request's slot. A failure after a chunk
     * committed leaves those deliveries queued (a replay asks for at-least-once re-delivery; repeating it queues
     * them again), and says so.
     */
    async replay(grant: Grant, after: string, slot: SlotRelease = NO_SLOT) {
      const cursor = readCursor(CHANGE_FEED, after, FeedCursor, '/after', 'is not a cursor the change feed returned', {
        unnamed: true,
      }) as { s: string }
      const state: ReplayState = {
        cursor: cursor.s,
        afterSeq: cursor.s,
        throughSeq: null,
        types: readableTypes(grant.scopes),
        now: isoNow(clock),
        last: false,
      }
      const chunkOperation = replayChunkOperation(grant, state)
      // Read when the chunk's transaction frees the slot, after the chunk ran: only the last chunk frees it.
      const lastChunkFrees: SlotRelease = { releaseIn: (tx) => (state.last ? slot.releaseIn(tx) : NO_SLOT.releaseIn(tx)) }
      let queued = 0
      for (let first = true; ; first = false) {
        let chunk: ReplayChunk
        try {
          const ctx = { clientCode: grant.clientCode, grant, id: grant.integrationId }
          chunk = (await executeWrite({ store, clock }, chunkOperation, ctx, undefined, lastChunkFrees)).body as ReplayChunk
        } catch (err) {
          if (first || err instanceof Problem) throw err
          throw new Problem(
            'projection_unavailable',
            `The replay stopped after queueing ${queued} deliveries: the store failed before the rest was queued. Those are queued and will be sent; repeat the replay to queue the rest (what is queued already is queued again, at least once).`,
          )
        }
        queued += chunk.queued
        if (state.last || chunk.lastSeq === null) return { queued }
        state.afterSeq = chunk.lastSeq
        // A turn of the event loop: requests waiting for the store (PGlite's one backend) run before the next chunk.
        await new Promise<void>((resolve) => setImmediate(resolve))
      }
    },
  }
}
