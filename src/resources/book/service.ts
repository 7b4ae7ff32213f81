import { canonicalJson } from '../../domain/canonical.ts'
import { Problem, unknownReferences } from '../../domain/problems.ts'
import { type Clock, isoNow } from '../../domain/time.ts'
import type { Grant } from '../../http/auth.ts'
import { lockIdentity } from '../../store/locks.ts'
import type { Queryable, Store } from '../../store/store.ts'
import { touchSourceActivity } from '../freshness/service.ts'
import { recordReceivableChanges } from '../receivables/store.ts'
import { type BookCompletionWrite, MAX_LISTED_OMISSIONS } from './schema.ts'
import { type CompletionRow, findCompletion, omissionsPage } from './store.ts'

const notFound = (id: string) => new Problem('financial_event_not_found', `No complete-book declaration ${id} for this client.`)

export function createBookService({ store, clock }: { store: Store; clock: Clock }) {
  async function view(db: Queryable, clientCode: string, row: CompletionRow) {
    const omissions = await omissionsPage(db, clientCode, row.external_completion_id, MAX_LISTED_OMISSIONS)
    return {
      externalCompletionId: row.external_completion_id,
      acceptedAt: row.accepted_at,
      asOf: row.body.asOf,
      batches: row.body.batches,
      coveredReceivableCount: row.covered_count,
      omissions: omissions.map((o) => ({
        externalReceivableId: o.external_receivable_id,
        flaggedAt: o.flagged_at,
        state: o.released_at ? ('released' as const) : ('held' as const),
      })),
      omissionsTruncated: row.omitted_count > MAX_LISTED_OMISSIONS,
      omittedReceivableCount: row.omitted_count,
      scope: 'all_receivables' as const,
      sourcePosition: Number(row.source_position),
    }
  }

  return {
    /**
     * Covered = Receivables written successfully by the listed batches; every other non-closed Receivable
     * of the client is flagged and held (hold other_protection) until the Source writes or closes it.
     * Flagging is set-based: one INSERT .. SELECT for the omissions, one UPDATE for the revisions, one
     * statement for their change events, however large the book.
     */
    declare(clientCode: string, grant: Grant, id: string, body: BookCompletionWrite) {
      return store.transaction(async (tx) => {
        await lockIdentity(tx, clientCode, 'book', 'declarations')
        const existing = await findCompletion(tx, clientCode, id)
        if (existing) {
          if (canonicalJson(existing.body) === canonicalJson(body))
            return { status: 200 as const, body: await view(tx, clientCode, existing) }
          throw new Problem('book_completion_conflict', `Complete-book declaration ${id} was already accepted with a different body.`)
        }
        const batches = await tx.query<{ external_batch_id: string; status: string }>(
          'SELECT external_batch_id, status FROM batches WHERE client_code = $1 AND external_batch_id = ANY($2::text[])',
          [clientCode, body.batches],
        )
        const status = new Map(batches.map((b) => [b.external_batch_id, b.status]))
        const missing = body.batches.flatMap((b, i) => (status.has(b) ? [] : [{ pointer: `/batches/${i}`, what: `Batch ${b}` }]))
        if (missing.length > 0) throw unknownReferences(missing)
        const unfinished = body.batches.filter((b) => ['queued', 'running'].includes(status.get(b) ?? ''))
        if (unfinished.length > 0) {
          throw new Problem(
            'batches_not_finished',
            `Batches still running: ${unfinished.join(', ')}. Poll them until finished, then declare.`,
            {
              extensions: { unfinishedBatches: unfinished },
            },
          )
        }
        const last = await tx.query<{ max: string | null }>(
          'SELECT max(source_position)::text AS max FROM book_completions WHERE client_code = $1',
          [clientCode],
        )
        const lastPosition = last[0]?.max
        if (lastPosition !== null && lastPosition !== undefined && BigInt(body.sourcePosition) <= BigInt(lastPosition)) {
          throw new Problem(
            'stale_source_position',
            `sourcePosition ${body.sourcePosition} must exceed the last declaration's ${lastPosition}.`,
            {
              extensions: { lastSourcePosition: Number(lastPosition) },
            },
          )
        }
        const now = isoNow(clock)
        const covered = await tx.query<{ n: number }>(
          `SELECT count(DISTINCT external_id)::int AS n FROM batch_records
            WHERE client_code = $1 AND external_batch_id = ANY($2::text[]) AND kind = 'receivable' AND status = 'succeeded'`,
          [clientCode, body.batches],
        )
        await tx.query(
          `INSERT INTO book_completions (client_code, external_completion_id, body, source_position, covered_count, omitted_count, accepted_at)
           VALUES ($1, $2, $3, $4, $5, 0, $6)`,
          [clientCode, id, JSON.stringify(body), body.sourcePosition, covered[0]?.n ?? 0, now],
        )
        // Receivables already held by an earlier declaration, or paused, already carry other_protection:
        // flagging them again does not change their holds, so only the others get a new revision.
        const flagged = await tx.query<{ external_receivable_id: string; newly_held: boolean }>(
          `WITH covered AS (
             SELECT DISTINCT external_id FROM batch_records
              WHERE client_code = $1 AND external_batch_id = ANY($2::text[]) AND kind = 'receivable' AND status = 'succeeded'),
           omitted AS (
             SELECT r.external_receivable_id, r.status = 'active' AND NOT EXISTS (
                      SELECT 1 FROM book_omissions o WHERE o.client_code = r.client_code
                         AND o.external_receivable_id = r.external_receivable_id AND o.released_at IS NULL) AS newly_held
               FROM receivables r
              WHERE r.client_code = $1 AND r.status <> 'closed'
                AND r.external_receivable_id NOT IN (SELECT external_id FROM covered)),
           ins AS (
             INSERT INTO book_omissions (client_code, external_completion_id, external_receivable_id, flagged_at)
             SELECT $1, $3, external_receivable_id, $4 FROM omitted)
           SELECT external_receivable_id, newly_held FROM omitted`,
          [clientCode, body.batches, id, now],
        )
        await tx.query('UPDATE book_completions SET omitted_count = $3 WHERE client_code = $1 AND external_completion_id = $2', [
          clientCode,
          id,
          flagged.length,
        ])
        const changed = flagged.filter((f) => f.newly_held).map((f) => f.external_receivable_id)
        await recordReceivableChanges(tx, clientCode, { only: changed }, now)
        touchSourceActivity(tx, clientCode, grant.feedMode, now)
        const row = (await findCompletion(tx, clientCode, id)) as CompletionRow
        return { status: 201 as const, body: await view(tx, clientCode, row) }
      })
    },

    async get(clientCode: string, id: string) {
      const row = await findCompletion(store, clientCode, id)
      if (!row) throw notFound(id)
      return view(store, clientCode, row)
    },
  }
}

export type BookService = ReturnType<typeof createBookService>
