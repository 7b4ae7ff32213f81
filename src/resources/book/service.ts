import { canonicalJson } from '../../domain/canonical.ts'
import { Problem, unknownReferences } from '../../domain/problems.ts'
import { isoNow } from '../../domain/time.ts'
import { lockIdentity } from '../../store/locks.ts'
import type { Queryable } from '../../store/store.ts'
import { answersInOrder } from '../../store/transactions.ts'
import type { HoldStore } from '../holds/store.ts'
import { defineOperation, type OperationContext, type RouteDeps } from '../operations.ts'
import type { UnitOfWork } from '../unit-of-work.ts'
import { BookCompletion, type BookCompletionPreview, BookCompletionWrite, MAX_LISTED_OMISSIONS } from './schema.ts'
import {
  batchStatuses,
  type CompletionRow,
  countCovered,
  findCompletion,
  flagOmissions,
  insertCompletion,
  lastDeclaredPosition,
  omissionsPage,
  previewDeclaration,
} from './store.ts'

const notFound = (id: string) => new Problem('financial_event_not_found', `No complete-book declaration ${id} for this client.`)

export interface BookServiceDeps extends RouteDeps {
  holds: Pick<HoldStore, 'bumpReceivableRevisions'>
}

/**
 * The checks a declaration passes before it changes anything, shared with its preview: every listed batch exists
 * (422 `unknown_reference` at /batches/<i>) and has finished (409 `batches_not_finished`), and `sourcePosition`
 * exceeds the last accepted declaration's (409 `stale_source_position`).
 */
async function checkDeclaration(db: Queryable, clientCode: string, body: BookCompletionWrite): Promise<void> {
  // One after the other: outside a transaction (the preview), statements sent together would take two connections,
  // and a refusal of the batches needs no second read.
  judgeBatches(body, await batchStatuses(db, clientCode, body.batches))
  judgePosition(body, await lastDeclaredPosition(db, clientCode))
}

/** `checkDeclaration`'s judgement, on what it read: the listed batches' statuses and the last declared position. */
function judgeDeclaration(body: BookCompletionWrite, status: ReadonlyMap<string, string>, lastPosition: string | null): void {
  judgeBatches(body, status)
  judgePosition(body, lastPosition)
}

function judgeBatches(body: BookCompletionWrite, status: ReadonlyMap<string, string>): void {
  const missing = body.batches.flatMap((b, i) => (status.has(b) ? [] : [{ pointer: `/batches/${i}`, what: `Batch ${b}` }]))
  if (missing.length > 0) throw unknownReferences(missing)
  const unfinished = body.batches.filter((b) => ['queued', 'running'].includes(status.get(b) ?? ''))
  if (unfinished.length > 0) {
    throw new Problem('batches_not_finished', `Batches still running: ${unfinished.join(', ')}. Poll them until finished, then declare.`, {
      extensions: { unfinishedBatches: unfinished },
    })
  }
}

function judgePosition(body: BookCompletionWrite, lastPosition: string | null): void {
  if (lastPosition !== null && BigInt(body.sourcePosition) <= BigInt(lastPosition)) {
    throw new Problem(
      'stale_source_position',
      `sourcePosition ${body.sourcePosition} must exceed the last declaration's ${lastPosition}.`,
      {
        extensions: { lastSourcePosition: Number(lastPosition) },
      },
    )
  }
}

export function createBookService(deps: BookServiceDeps) {
  const { store, clock } = deps
  const { bumpReceivableRevisions } = deps.holds
  async function view(db: Queryable, clientCode: string, row: CompletionRow) {
    return viewOf(row, await omissionsPage(db, clientCode, row.external_completion_id, MAX_LISTED_OMISSIONS))
  }

  /** A write's answer: the declaration as its transaction left it, both reads sent at once (its id is known). */
  async function renderWritten(db: Queryable, clientCode: string, id: string) {
    const [row, omissions] = await answersInOrder([
      findCompletion(db, clientCode, id),
      omissionsPage(db, clientCode, id, MAX_LISTED_OMISSIONS),
    ])
    return viewOf(row as CompletionRow, omissions)
  }

  function viewOf(row: CompletionRow, omissions: Awaited<ReturnType<typeof omissionsPage>>) {
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

  /**
   * Covered = Receivables written successfully by the listed batches; every other non-closed Receivable
   * of the client is flagged and held (hold other_protection) until the Source writes or closes it, and a covered
   * Receivable an earlier declaration flagged is released (the store's DECLARATION_PLAN, shared with `preview`).
   * Flagging is set-based: one statement for the omissions and the count, one UPDATE for the revisions, one
   * statement for their change events, however large the book.
   */
  const declareOperation = defineOperation({
    kind: 'book_declaration',
    scopes: ['receivables:write'],
    body: BookCompletionWrite,
    response: BookCompletion,
    source: true,
    async run(uow: UnitOfWork, { clientCode, id }: OperationContext, body: BookCompletionWrite) {
      const { tx } = uow
      // Round trip one (docs/decisions.md, "A write in two round trips"): the client's declaration lock, then every
      // read the checks and the insert need (what the listed batches cover is read even when a check refuses).
      const [, existing, status, lastPosition, covered] = await answersInOrder([
        lockIdentity(tx, clientCode, 'book', 'declarations'),
        findCompletion(tx, clientCode, id),
        batchStatuses(tx, clientCode, body.batches),
        lastDeclaredPosition(tx, clientCode),
        countCovered(tx, clientCode, body.batches),
      ])
      if (existing) {
        if (canonicalJson(existing.body) === canonicalJson(body))
          return { status: 200 as const, body: () => view(tx, clientCode, existing) }
        throw new Problem('book_completion_conflict', `Complete-book declaration ${id} was already accepted with a different body.`)
      }
      judgeDeclaration(body, status, lastPosition)
      const now = isoNow(clock)
      // Only the Receivables whose holds the flags and releases change get a new revision: one already held
      // (flagged by an earlier declaration, or paused) keeps its holds when flagged again, and a paused one
      // keeps other_protection when released. The declaration and its flags in one round trip.
      const [, changed] = await answersInOrder([
        insertCompletion(tx, clientCode, id, body, covered, now),
        flagOmissions(tx, clientCode, id, body.batches, now),
      ])
      uow.appendChanges(clientCode, await bumpReceivableRevisions(tx, clientCode, { only: changed }, now))
      return { status: 201 as const, body: () => renderWritten(tx, clientCode, id) }
    },
  })

  return {
    declareOperation,

    /**
     * What declaring `body` would flag and release now, changing nothing: the declaration's own checks and its
     * own plan (DECLARATION_PLAN), read without a lock or a write.
     */
    async preview(clientCode: string, body: BookCompletionWrite): Promise<BookCompletionPreview> {
      await checkDeclaration(store, clientCode, body)
      const plan = await previewDeclaration(store, clientCode, body.batches, MAX_LISTED_OMISSIONS)
      return {
        asOf: body.asOf,
        batches: body.batches,
        coveredReceivableCount: plan.covered_count,
        omissions: plan.omissions.map((o) => ({ externalReceivableId: o.id, newlyHeld: o.newly_held })),
        omissionsTruncated: plan.omitted_count > MAX_LISTED_OMISSIONS,
        omittedReceivableCount: plan.omitted_count,
        releases: plan.releases.map((externalReceivableId) => ({ externalReceivableId })),
        releasesTruncated: plan.released_count > MAX_LISTED_OMISSIONS,
        releasedReceivableCount: plan.released_count,
        scope: 'all_receivables',
        sourcePosition: body.sourcePosition,
      }
    },

    async get(clientCode: string, id: string) {
      const row = await findCompletion(store, clientCode, id)
      if (!row) throw notFound(id)
      return view(store, clientCode, row)
    },
  }
}

export type BookService = ReturnType<typeof createBookService>
