import { encodeCursor, readCursor, TimelineCursor } from '../../domain/cursor.ts'
import { describeMoney } from '../../domain/money.ts'
import { Problem } from '../../domain/problems.ts'
import type { Queryable } from '../../store/store.ts'
import type { TimelineEntry } from './schema.ts'
import { receivableExists, type TimelineRow, timelinePage } from './store.ts'

/**
 * A Receivable's timeline: everything that happened to it, oldest first, with who did it and why, read from the
 * records the service already keeps (src/resources/timeline/store.ts). Nothing here writes.
 */

const str = (v: unknown) => (v === null || v === undefined ? '' : String(v))
const amount = (d: Record<string, unknown>) => describeMoney(BigInt(str(d.amountMinor) || '0'), str(d.currency))
const HOLD_REASONS: Record<string, string> = {
  book_omission: 'omitted from complete-book declaration',
  reconciliation_held: 'receipt lines of reconciliation differ from the payment',
  collection_disabled: 'collection switched off for the client',
  source_stale: 'the Source has not been heard from',
}

/** The entry's sentence and the resource it refers to. */
function describe(receivableId: string, row: TimelineRow): Pick<TimelineEntry, 'summary' | 'ref'> {
  const d = row.detail
  const id = str(d.id)
  const pr = str(d.paymentRequestId)
  switch (row.kind) {
    case 'revision': {
      const revision = Number(d.revision)
      const what = d.type === 'receivable.created' ? 'created' : 'updated'
      return { summary: `Revision ${revision}: ${what}`, ref: { type: 'receivable', id: receivableId, revision } }
    }
    case 'adjustment':
    case 'credit_note':
    case 'write_off':
      return { summary: `${row.kind.replace('_', ' ')} ${id}: ${amount(d)} (${str(d.reason)})`, ref: { type: row.kind, id } }
    case 'payment_observation':
      return { summary: `Payment observation ${id} (${str(d.type)}): ${amount(d)} allocated`, ref: { type: 'payment_observation', id } }
    case 'hold_placed':
    case 'hold_released': {
      const reason = HOLD_REASONS[str(d.reason)] ?? str(d.reason)
      const verb = row.kind === 'hold_placed' ? 'Hold placed' : 'Hold released'
      const subject = d.reason === 'book_omission' ? 'book_completion' : d.reason === 'reconciliation_held' ? 'payment_reconciliation' : ''
      return { summary: `${verb} (${str(d.reason)}): ${reason}${id ? ` ${id}` : ''}`, ...(subject ? { ref: { type: subject, id } } : {}) }
    }
    case 'recovery_instruction':
      return {
        summary: `Recovery instruction ${id} revision ${Number(d.revision)}: ${str(d.state)} (${str(d.cause)})`,
        ref: { type: 'recovery_instruction', id, revision: Number(d.revision) },
      }
    case 'payment_request':
      return { summary: `Payment request ${id} for ${amount(d)}`, ref: { type: 'payment_request', id } }
    case 'payment_request_expired':
      return { summary: `Payment request ${id} expired unpaid`, ref: { type: 'payment_request', id } }
    case 'payment_request_canceled':
      return { summary: `Payment request ${id} canceled (${str(d.reason)})`, ref: { type: 'payment_request', id } }
    case 'payment':
      return { summary: `Payment of ${amount(d)} ${str(d.status)}`, ref: { type: 'payment', id } }
    case 'refund':
      return { summary: `Refund ${id} of ${amount(d)} requested (${str(d.reason)})`, ref: { type: 'refund', id: `${pr}/${id}` } }
    case 'refund_succeeded':
    case 'refund_failed':
      return {
        summary: `Refund ${id} ${row.kind === 'refund_succeeded' ? 'succeeded' : `failed (${str(d.reason)})`}`,
        ref: { type: 'refund', id: `${pr}/${id}` },
      }
    case 'reversal':
      return { summary: `Payment ${pr} reversed: ${amount(d)}`, ref: { type: 'payment', id: pr } }
    case 'reinstatement':
      return { summary: `Payment ${pr} reinstated (a dispute won): ${amount(d)}`, ref: { type: 'payment', id: pr } }
    case 'reconciliation':
      return { summary: `Reconciliation ${id} of payment ${pr}: ${str(d.status)}`, ref: { type: 'payment_reconciliation', id } }
    case 'reconciliation_resolved':
      return { summary: `Reconciliation ${id} resolved`, ref: { type: 'payment_reconciliation', id } }
    default: {
      const verb = row.kind === 'receipt' ? 'queued' : row.kind.replace('receipt_', '')
      return { summary: `Receipt of the ${str(d.of)} of payment ${pr} ${verb}`, ref: { type: 'receipt', id } }
    }
  }
}

export function toTimelineEntry(receivableId: string, row: TimelineRow): TimelineEntry {
  const actor = {
    type: (row.actor_type ?? 'unknown') as TimelineEntry['actor']['type'],
    ...(row.actor_name ? { name: row.actor_name } : {}),
  }
  return { at: row.list_at, kind: row.kind as TimelineEntry['kind'], actor, ...describe(receivableId, row) }
}

/** The name a Receivable timeline's cursors carry; the operator's route names its own (`admin/` before it). */
export const TIMELINE = 'receivable-timeline'

export function createTimelineService({ store }: { store: Queryable }) {
  return {
    /**
     * One page, oldest first; an unknown Receivable is 404, a cursor no timeline returned 422. `list` is the name its
     * cursors carry: the integration's and the operator's routes are two lists (src/domain/cursor.ts).
     */
    async page(clientCode: string, receivableId: string, cursor: string | undefined, limit: number, list = TIMELINE) {
      const after = readCursor(list, cursor, TimelineCursor, '/query/cursor', 'is not a cursor this timeline returned')
      if (!(await receivableExists(store, clientCode, receivableId)))
        throw new Problem('receivable_not_found', `No Receivable ${receivableId} for this client.`)
      const rows = await timelinePage(
        store,
        clientCode,
        receivableId,
        after && { at: after.timeline[0], key: after.timeline[1] },
        limit + 1,
      )
      const page = rows.slice(0, limit)
      const last = page.at(-1)
      return {
        data: page.map((row) => toTimelineEntry(receivableId, row)),
        nextCursor: rows.length > limit && last ? encodeCursor(list, { timeline: [last.list_at, last.key] }) : null,
      }
    },
  }
}

export type TimelineService = ReturnType<typeof createTimelineService>
