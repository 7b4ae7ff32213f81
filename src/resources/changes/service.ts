import type { Grant } from '../../access/grants.ts'
import { CHANGE_FEED, encodeCursor, readCursor, seqCursor } from '../../domain/cursor.ts'
import { Problem } from '../../domain/problems.ts'
import type { Scope } from '../../domain/scopes.ts'
import type { Store } from '../../store/store.ts'
import type { ResourceType } from '../feed/store.ts'
import { eventsAfter, purgedThrough } from './store.ts'

/** Which read scope lets a reader see which resource type in the feed. */
export const FEED_READ_SCOPES: Record<ResourceType, Scope> = {
  customer: 'customers:read',
  receivable: 'receivables:read',
  payment_observation: 'payment_observations:read',
  payment_request: 'payment_requests:read',
  payment: 'payment_requests:read',
  payment_reconciliation: 'financial_corrections:read',
  refund: 'payment_requests:read',
}

/** From 0: an empty feed's `nextCursor` is `{s: '0'}`, "from the start". */
const Cursor = seqCursor(0n)

export function createChangeService({ store }: { store: Store }) {
  return {
    /**
     * One page after the cursor, in sequence (= commit) order. Sequence numbers are allocated under the
     * client's feed-head row lock held to commit (feed/store.ts), so every event a reader can see has
     * all lower numbers visible too: following nextCursor sees each committed event exactly once.
     */
    async page(clientCode: string, grant: Grant, q: { after?: string | undefined; limit: number }) {
      const types = (Object.keys(FEED_READ_SCOPES) as ResourceType[]).filter((t) => grant.scopes.has(FEED_READ_SCOPES[t]))
      if (types.length === 0) {
        throw new Problem('client_scope_denied', 'Reading the change feed needs a read scope of at least one resource type.')
      }
      const cursor = readCursor(CHANGE_FEED, q.after, Cursor, '/query/after', 'is not a cursor this feed returned', { unnamed: true })
      const after = cursor?.s ?? '0'
      const purged = await purgedThrough(store, clientCode)
      if (cursor && BigInt(after) < purged) {
        throw new Problem(
          'cursor_expired',
          'Events after this cursor were purged (kept 30 days). Re-read the resources, then follow the feed from a new cursor.',
        )
      }
      const rows = await eventsAfter(store, clientCode, after, types, q.limit + 1)
      const page = rows.slice(0, q.limit)
      const last = page.at(-1)
      return {
        data: page.map((r) => ({
          eventId: r.event_id,
          type: r.type,
          resource: { type: r.resource_type, id: r.resource_id },
          revision: Number(r.revision),
          occurredAt: r.occurred_at,
        })),
        nextCursor: encodeCursor(CHANGE_FEED, { s: last ? last.seq : after }),
        hasMore: rows.length > q.limit,
      }
    },
  }
}

export type ChangeService = ReturnType<typeof createChangeService>
