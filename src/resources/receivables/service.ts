import type { Grant } from '../../access/grants.ts'
import { canonicalJson } from '../../domain/canonical.ts'
import { encodeCursor, IdentifierCursor, readCursor } from '../../domain/cursor.ts'
import { holdsFromRow } from '../../domain/holds.ts'
import { money, toMinor } from '../../domain/money.ts'
import { workingAmountMinor } from '../../domain/money-rules.ts'
import { fieldProblem, Problem, unknownReferences } from '../../domain/problems.ts'
import { isoNow } from '../../domain/time.ts'
import { lockIdentities, lockIdentity } from '../../store/locks.ts'
import type { Queryable } from '../../store/store.ts'
import { answersInOrder } from '../../store/transactions.ts'
import type { RestrictionRules } from '../holds/restrictions.ts'
import type { HoldStore } from '../holds/store.ts'
import {
  defineOperation,
  type OperationContext,
  type RouteDeps,
  runOne,
  type SetOperation,
  type SetOutcome,
  type WriteOperation,
} from '../operations.ts'
import type { UnitOfWork } from '../unit-of-work.ts'
import { CloseCommand, PauseCommand, ReceivableResponse, ReceivableWrite, ReopenCommand, ResumeCommand } from './schema.ts'
import {
  findReceivable,
  findReceivableCore,
  insertReceivablesIfNew,
  listReceivables,
  type ReceivableCore,
  type ReceivableInsertResult,
  type ReceivableRow,
  type ReceivableStatus,
  type ReceivableWriteItem,
  replaceReceivable,
  replaceReceivables,
  setStatus,
} from './store.ts'

/** The database (reads, and each write's transaction), the clock, and what a Receivable write uses of other families. */
export interface ReceivableServiceDeps extends RouteDeps {
  holds: Pick<HoldStore, 'bumpRevision' | 'releaseOmissions'>
  restrictions: Pick<RestrictionRules, 'suspendInstructionsOf' | 'suspendRestrictedInstructions' | 'syncRestrictions'>
}

export const receivableNotFound = (id: string) => new Problem('receivable_not_found', `No Receivable ${id} for this client.`)

/** The industry context each profile requires; a grant's profile fixes which one a Receivable must carry. */
const PROFILE_CONTEXT = { credit_union: 'creditUnion' } as const

const sortRestrictions = (list: readonly { type: string }[] | undefined) => [...(list ?? [])].sort((a, b) => (a.type < b.type ? -1 : 1))

export function toReceivableResponse(row: ReceivableRow): ReceivableResponse {
  const source = BigInt(row.source_amount_minor)
  const confirmed = BigInt(row.confirmed_unreconciled_minor)
  const working = workingAmountMinor({
    sourceAmountMinor: source,
    confirmedUnreconciledMinor: confirmed,
    acknowledgedUndeclaredMinor: BigInt(row.acknowledged_undeclared_minor),
  })
  const holds = holdsFromRow(row)
  return {
    ...row.representation,
    restrictions: row.representation.restrictions ?? [],
    externalReceivableId: row.external_receivable_id,
    sourceRevision: Number(row.source_revision),
    status: row.status,
    revision: Number(row.revision),
    updatedAt: row.updated_at,
    financialPosition: {
      sourceAmount: money(source, row.currency),
      workingAmount: money(working, row.currency),
      confirmedUnreconciledAmount: money(confirmed, row.currency),
      receiptAcknowledgedAmount: money(BigInt(row.receipt_acknowledged_minor), row.currency),
    },
    recovery: { held: holds.length > 0, holds },
  }
}

/** Lifecycle commands: which states each may start from, and where it leads. */
const TRANSITIONS = {
  pause: { from: ['active'], to: 'paused' },
  resume: { from: ['paused'], to: 'active' },
  close: { from: ['active', 'paused'], to: 'closed' },
  reopen: { from: ['closed'], to: 'active' },
} as const satisfies Record<string, { from: readonly ReceivableStatus[]; to: ReceivableStatus }>
export type LifecycleCommand = keyof typeof TRANSITIONS

/** What a PUT of an existing Receivable does (`decideReplace`), when it is not refused. */
type ReplaceDecision = 'retry' | 'replace' | 'replace_restrictions'
/** A record `many` hands to the per-record rules: the row it read and what was decided of it. */
interface Replacing {
  existing: ReceivableCore
  decided: ReplaceDecision
}
const COMMAND_BODIES = { pause: PauseCommand, resume: ResumeCommand, close: CloseCommand, reopen: ReopenCommand } as const

/** A Receivable as its GET answers, read in the write's transaction (a write's response renders before COMMIT). */
async function readInTx(tx: Queryable, clientCode: string, id: string): Promise<ReceivableResponse> {
  const row = await findReceivable(tx, clientCode, id)
  if (!row) throw receivableNotFound(id)
  return toReceivableResponse(row)
}

/** The grant's industry profile requires its context in the body (`creditUnion`). */
function profileProblem(grant: Grant, body: ReceivableWrite): Problem | undefined {
  const contextKey = PROFILE_CONTEXT[grant.industryProfile]
  if (contextKey in body) return undefined
  return new Problem('profile_mismatch', `The grant's industry profile ${grant.industryProfile} requires the ${contextKey} context.`, {
    errors: [{ code: 'profile_mismatch', detail: `required by industry profile ${grant.industryProfile}`, pointer: `/${contextKey}` }],
  })
}

/**
 * The set-based Receivable PUT: one statement creates every new Receivable whose Customers exist and reads
 * the existing ones (with their held omissions), the rules run in memory, and one statement replaces all the
 * replaced ones. A retry that releases a held omission and a replace that changes restrictions are `fallback`
 * (the per-record rules of `run`); a create with restrictions syncs them here, record by record.
 */
function setOperation(deps: ReceivableServiceDeps): SetOperation<ReceivableWrite> {
  const { syncRestrictions } = deps.restrictions
  return {
    keys: (id, body) => ({
      writes: [`receivable:${id}`],
      reads: body.responsibleCustomers.map((c) => `customer:${c.externalCustomerId}`),
    }),
    async runMany(uow, { clientCode, grant, locked }, records, now) {
      const { tx } = uow
      const outcomes: SetOutcome[] = records.map((r) => {
        const problem = profileProblem(grant, r.body)
        return problem ? { problem } : { fallback: true }
      })
      const items: (ReceivableWriteItem & { index: number })[] = []
      records.forEach((r, index) => {
        if ('fallback' in (outcomes[index] as SetOutcome))
          items.push({ index, id: r.id, body: r.body, amountMinor: toMinor(r.body.recoverableAmount.amount) })
      })
      if (items.length === 0) return outcomes
      // The identity locks and the read the decision needs, sent together: one round trip with BEGIN (the read runs
      // after the locks are granted, in a snapshot of its own, so it sees what a writer before it committed).
      const locking = locked
        ? undefined
        : lockIdentities(
            tx,
            clientCode,
            items.map((it) => ['receivable', it.id] as const),
          )
      const [, found] = await Promise.all([locking, insertReceivablesIfNew(tx, clientCode, items, now)])
      const replaces: (ReceivableWriteItem & { index: number; existing: ReceivableCore })[] = []
      const read = (id: string) => () => readInTx(tx, clientCode, id)
      for (const it of items) {
        const { id, body, index } = it
        const f = found.get(id) as ReceivableInsertResult
        const ids = body.responsibleCustomers.map((c) => c.externalCustomerId)
        if (f.knownCustomers.size < ids.length) {
          outcomes[index] = {
            problem: unknownReferences(
              ids.flatMap((cid, i) =>
                f.knownCustomers.has(cid) ? [] : [{ pointer: `/responsibleCustomers/${i}/externalCustomerId`, what: `Customer ${cid}` }],
              ),
            ),
          }
          continue
        }
        if (f.created) {
          if (body.restrictions?.length) await syncRestrictions(tx, clientCode, 'receivable', id, body.restrictions)
          uow.appendChange(clientCode, {
            type: 'receivable.created',
            resourceType: 'receivable',
            resourceId: id,
            revision: 1,
            occurredAt: now,
          })
          outcomes[index] = { status: 201, body: read(id) }
          continue
        }
        const existing = f.existing as ReceivableCore
        const decided = decideReplace(body, existing)
        if (decided instanceof Problem) outcomes[index] = { problem: decided }
        else if (decided === 'replace') replaces.push({ ...it, existing })
        else if (decided === 'retry' && !f.heldOmission) outcomes[index] = { status: 200, body: read(id) }
        // The per-record rules (`single`): a retry that releases a held omission, a replace that changes restrictions.
        else outcomes[index] = { fallback: true, state: { existing, decided } satisfies Replacing }
      }
      const revisions = await replaceReceivables(tx, clientCode, replaces, now)
      for (const { id, index } of replaces) {
        uow.appendChange(clientCode, {
          type: 'receivable.updated',
          resourceType: 'receivable',
          resourceId: id,
          revision: revisions.get(id) as number,
          occurredAt: now,
        })
        outcomes[index] = { status: 200, body: read(id) }
      }
      return outcomes
    },
  }
}

/**
 * What a PUT of an existing Receivable does, decided in memory, once, for the set-based run and the per-record
 * rules alike: an identical retry (the same source revision and body), a refusal, or a replace (with or
 * without a change of restrictions).
 */
function decideReplace(body: ReceivableWrite, existing: ReceivableCore): ReplaceDecision | Problem {
  const current = Number(existing.source_revision)
  if (body.sourceRevision === current && canonicalJson(body) === canonicalJson(existing.representation)) return 'retry'
  if (body.sourceRevision <= current) {
    return new Problem(
      'stale_source_revision',
      `sourceRevision ${body.sourceRevision} is not newer than the Receivable's current source revision ${current}.`,
      { extensions: { currentSourceRevision: current } },
    )
  }
  if (body.recoverableAmount.currency !== existing.currency) {
    return fieldProblem('/recoverableAmount/currency', 'custom', `must stay ${existing.currency}: a Receivable has one currency`)
  }
  const restrictionsChanged =
    canonicalJson(sortRestrictions(body.restrictions)) !== canonicalJson(sortRestrictions(existing.representation.restrictions))
  return restrictionsChanged ? 'replace_restrictions' : 'replace'
}
/** pause, resume, close, reopen. Reopen never resumes recovery: it suspends an authorized instruction. */
function lifecycleCommands(deps: ReceivableServiceDeps): Record<LifecycleCommand, WriteOperation> {
  const { clock } = deps
  const { releaseOmissions } = deps.holds
  const { suspendInstructionsOf } = deps.restrictions
  const commandOperation = (command: LifecycleCommand): WriteOperation =>
    defineOperation({
      kind: `receivable_${command}`,
      scopes: ['receivables:write'],
      body: COMMAND_BODIES[command],
      response: ReceivableResponse,
      source: true,
      async run(uow: UnitOfWork, { clientCode, id }: OperationContext, body: { effectiveAt: string; reason?: string }) {
        const { tx } = uow
        // The lock and the read after it, sent together (one round trip with BEGIN; the read sees what committed first).
        const [, row] = await Promise.all([lockIdentity(tx, clientCode, 'receivable', id), findReceivableCore(tx, clientCode, id)])
        if (!row) throw receivableNotFound(id)
        const t = TRANSITIONS[command]
        if (!(t.from as readonly string[]).includes(row.status)) {
          throw new Problem('receivable_state_conflict', `Cannot ${command} a Receivable that is ${row.status}.`, {
            extensions: { currentStatus: row.status },
          })
        }
        const now = isoNow(clock)
        const revision = await setStatus(tx, clientCode, id, t.to, body.reason ?? null, body.effectiveAt, now)
        if (command === 'close') await releaseOmissions(tx, clientCode, [id], now)
        // Reopening never resumes recovery by itself: an authorized instruction is suspended and needs a
        // new revision from the Source (spec, Receivable status table).
        if (command === 'reopen') await suspendInstructionsOf(tx, clientCode, [id], now, 'receivable_reopened')
        uow.appendChange(clientCode, { type: 'receivable.updated', resourceType: 'receivable', resourceId: id, revision, occurredAt: now })
        return { status: 200 as const, body: () => readInTx(tx, clientCode, id) }
      },
    })
  return {
    pause: commandOperation('pause'),
    resume: commandOperation('resume'),
    close: commandOperation('close'),
    reopen: commandOperation('reopen'),
  }
}

export function createReceivableService(deps: ReceivableServiceDeps) {
  const { store, clock } = deps
  const { bumpRevision, releaseOmissions } = deps.holds
  const { suspendRestrictedInstructions, syncRestrictions } = deps.restrictions
  const view = toReceivableResponse
  const many = setOperation(deps)

  const put = defineOperation({
    kind: 'receivable',
    scopes: ['receivables:write'],
    body: ReceivableWrite,
    response: ReceivableResponse,
    source: true,
    many,
    /** A list of one through `many`; what it does not do set-based runs the per-record rules (`single`). */
    run(uow: UnitOfWork, ctx: OperationContext, body: ReceivableWrite) {
      const now = isoNow(clock)
      return runOne(many, uow, ctx, body, now, (state) => single(uow, ctx, body, state as Replacing, now))
    },
  })
  /**
   * The per-record rules of a PUT of an existing Receivable that `many` does not do set-based (its `fallback`,
   * with the row it read, the identity it locked and what `decideReplace` decided): a retry that releases a
   * held omission, and a replace that changes restrictions.
   */
  async function single(
    uow: UnitOfWork,
    { clientCode, id }: OperationContext,
    body: ReceivableWrite,
    { existing, decided }: Replacing,
    now: string,
  ) {
    const { tx } = uow
    if (decided === 'retry') {
      // The Source wrote it again: a complete-book omission is released (a change of holds).
      if (await releaseOmissions(tx, clientCode, [id], now)) {
        await bumpAndRecord(uow, clientCode, id, now)
      }
      return { status: 200 as const, body: () => readInTx(tx, clientCode, id) }
    }
    // The replace releases a held complete-book omission too (a change of holds its own revision carries).
    const amount = toMinor(body.recoverableAmount.amount)
    // The replace and the read of its restrictions in one round trip (the replace's answer decides nothing).
    const [, restrictionsChanged] = await answersInOrder([
      replaceReceivable(tx, clientCode, id, body, amount, now),
      syncRestrictions(tx, clientCode, 'receivable', id, body.restrictions ?? []),
    ])
    // Its own revision moved with the replace and carries the change of its holds; a restriction raised here still
    // suspends its instruction: sent ahead with the flush (nothing this write decides depends on its answer).
    if (restrictionsChanged) uow.send((sending) => suspendRestrictedInstructions(sending, clientCode, [id], now))
    uow.appendChange(clientCode, {
      type: 'receivable.updated',
      resourceType: 'receivable',
      resourceId: id,
      revision: Number(existing.revision) + 1,
      occurredAt: now,
    })
    return { status: 200 as const, body: () => readInTx(tx, clientCode, id) }
  }

  async function bumpAndRecord(uow: UnitOfWork, clientCode: string, id: string, now: string) {
    const revision = await bumpRevision(uow.tx, clientCode, id, now)
    uow.appendChange(clientCode, {
      type: 'receivable.updated',
      resourceType: 'receivable',
      resourceId: id,
      revision,
      occurredAt: now,
    })
  }
  const commands = lifecycleCommands(deps)

  return {
    put,
    readInTx,
    view,

    get(clientCode: string, id: string, db: Queryable = store) {
      return readInTx(db, clientCode, id)
    },

    async list(clientCode: string, q: { cursor?: string | undefined; limit: number; status?: ReceivableStatus | undefined }) {
      const after = readCursor('receivables', q.cursor, IdentifierCursor, '/query/cursor', 'is not a cursor this list returned')
      const rows = await listReceivables(store, clientCode, { after: after?.after, status: q.status, limit: q.limit + 1 })
      const page = rows.slice(0, q.limit)
      const last = page.at(-1)
      return {
        data: page.map(view),
        nextCursor: rows.length > q.limit && last ? encodeCursor('receivables', { after: last.external_receivable_id }) : null,
      }
    },

    commands,
  }
}
export type ReceivableService = ReturnType<typeof createReceivableService>
