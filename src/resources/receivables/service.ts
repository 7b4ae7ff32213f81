import { z } from 'zod'
import { canonicalJson } from '../../domain/canonical.ts'
import { holdsFromRow } from '../../domain/holds.ts'
import { money, toMinor } from '../../domain/money.ts'
import { fieldProblem, Problem, unknownReferences } from '../../domain/problems.ts'
import { isoNow } from '../../domain/time.ts'
import type { Grant } from '../../http/auth.ts'
import { decodeCursor, encodeCursor } from '../../http/common-schemas.ts'
import { lockIdentity } from '../../store/locks.ts'
import type { Queryable } from '../../store/store.ts'
import type { BookStore } from '../book/store.ts'
import type { CustomerStore } from '../customers/store.ts'
import { defineOperation, executeWrite, type OperationContext, type RouteDeps, type WriteOperation } from '../operations.ts'
import type { RestrictionRules } from '../recovery/restrictions.ts'
import type { UnitOfWork } from '../unit-of-work.ts'
import { CloseCommand, PauseCommand, ReceivableResponse, ReceivableWrite, ReopenCommand, ResumeCommand } from './schema.ts'
import {
  bumpRevision,
  findReceivable,
  findReceivableCore,
  insertReceivableIfNew,
  listReceivables,
  type ReceivableCore,
  type ReceivableRow,
  type ReceivableStatus,
  replaceReceivable,
  setStatus,
} from './store.ts'

/** The database (reads, and each write's transaction), the clock, and what a Receivable write uses of other families. */
export interface ReceivableServiceDeps extends RouteDeps {
  customers: Pick<CustomerStore, 'existingCustomerIds'>
  book: Pick<BookStore, 'releaseOmissions'>
  restrictions: Pick<RestrictionRules, 'suspendInstructionsOf' | 'suspendRestrictedInstructions' | 'syncRestrictions'>
}

export const receivableNotFound = (id: string) => new Problem('receivable_not_found', `No Receivable ${id} for this client.`)

/** The industry context each profile requires; a grant's profile fixes which one a Receivable must carry. */
const PROFILE_CONTEXT = { credit_union: 'creditUnion' } as const

const sortRestrictions = (list: readonly { type: string }[] | undefined) => [...(list ?? [])].sort((a, b) => (a.type < b.type ? -1 : 1))

export function toReceivableResponse(row: ReceivableRow): ReceivableResponse {
  const source = BigInt(row.source_amount_minor)
  const confirmed = BigInt(row.confirmed_unreconciled_minor)
  const working = source - confirmed > 0n ? source - confirmed : 0n
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
const COMMAND_BODIES = { pause: PauseCommand, resume: ResumeCommand, close: CloseCommand, reopen: ReopenCommand } as const

export function createReceivableService(deps: ReceivableServiceDeps) {
  const { store, clock } = deps
  const { existingCustomerIds } = deps.customers
  const { releaseOmissions } = deps.book
  const { suspendInstructionsOf, suspendRestrictedInstructions, syncRestrictions } = deps.restrictions
  const view = toReceivableResponse

  async function readInTx(tx: Queryable, clientCode: string, id: string): Promise<ReceivableResponse> {
    const row = await findReceivable(tx, clientCode, id)
    if (!row) throw receivableNotFound(id)
    return view(row)
  }

  const put = defineOperation({
    kind: 'receivable',
    scopes: ['receivables:write'],
    body: ReceivableWrite,
    response: ReceivableResponse,
    source: true,
    async run(uow: UnitOfWork, { clientCode, grant, id }: OperationContext, body: ReceivableWrite) {
      const { tx } = uow
      const contextKey = PROFILE_CONTEXT[grant.industryProfile]
      if (!(contextKey in body)) {
        throw new Problem('profile_mismatch', `The grant's industry profile ${grant.industryProfile} requires the ${contextKey} context.`, {
          errors: [
            { code: 'profile_mismatch', detail: `required by industry profile ${grant.industryProfile}`, pointer: `/${contextKey}` },
          ],
        })
      }
      await lockIdentity(tx, clientCode, 'receivable', id)
      const now = isoNow(clock)
      const amount = toMinor(body.recoverableAmount.amount)
      const { created, knownCustomers, existing: found } = await insertReceivableIfNew(tx, clientCode, id, body, amount, now)
      if (knownCustomers < body.responsibleCustomers.length) {
        const ids = body.responsibleCustomers.map((c) => c.externalCustomerId)
        const known = await existingCustomerIds(tx, clientCode, ids)
        throw unknownReferences(
          ids.flatMap((cid, i) =>
            known.has(cid) ? [] : [{ pointer: `/responsibleCustomers/${i}/externalCustomerId`, what: `Customer ${cid}` }],
          ),
        )
      }
      if (created) {
        if (body.restrictions?.length) await syncRestrictions(tx, clientCode, 'receivable', id, body.restrictions)
        uow.appendChange(clientCode, {
          type: 'receivable.created',
          resourceType: 'receivable',
          resourceId: id,
          revision: 1,
          occurredAt: now,
        })
        return { status: 201 as const, body: () => readInTx(tx, clientCode, id) }
      }
      const existing = found as ReceivableCore
      const current = Number(existing.source_revision)
      if (body.sourceRevision === current && canonicalJson(body) === canonicalJson(existing.representation)) {
        // The Source wrote it again: a complete-book omission is released (a change of holds).
        if (await releaseOmissions(tx, clientCode, [id], now)) {
          await bumpAndRecord(uow, clientCode, id, now)
        }
        return { status: 200 as const, body: () => readInTx(tx, clientCode, id) }
      }
      if (body.sourceRevision <= current) {
        throw new Problem(
          'stale_source_revision',
          `sourceRevision ${body.sourceRevision} is not newer than the Receivable's current source revision ${current}.`,
          { extensions: { currentSourceRevision: current } },
        )
      }
      if (body.recoverableAmount.currency !== existing.currency) {
        throw fieldProblem('/recoverableAmount/currency', 'custom', `must stay ${existing.currency}: a Receivable has one currency`)
      }
      // The replace releases a held complete-book omission too (a change of holds its own revision carries).
      await replaceReceivable(tx, clientCode, id, body, amount, now)
      // Its own revision moved with the replace and carries the change of its holds; a restriction raised
      // here still suspends its instruction.
      const restrictionsChanged =
        canonicalJson(sortRestrictions(body.restrictions)) !== canonicalJson(sortRestrictions(existing.representation.restrictions))
      if (restrictionsChanged && (await syncRestrictions(tx, clientCode, 'receivable', id, body.restrictions ?? [])))
        await suspendRestrictedInstructions(tx, clientCode, [id], now)
      uow.appendChange(clientCode, {
        type: 'receivable.updated',
        resourceType: 'receivable',
        resourceId: id,
        revision: Number(existing.revision) + 1,
        occurredAt: now,
      })
      return { status: 200 as const, body: () => readInTx(tx, clientCode, id) }
    },
  })

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

  /** pause, resume, close, reopen. Reopen never resumes recovery: it suspends an authorized instruction. */
  function commandOperation(command: LifecycleCommand): WriteOperation {
    return defineOperation({
      kind: `receivable_${command}`,
      scopes: ['receivables:write'],
      body: COMMAND_BODIES[command],
      response: ReceivableResponse,
      source: true,
      async run(uow: UnitOfWork, { clientCode, id }: OperationContext, body: { effectiveAt: string; reason?: string }) {
        const { tx } = uow
        await lockIdentity(tx, clientCode, 'receivable', id)
        const row = await findReceivableCore(tx, clientCode, id)
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
  }
  const commands: Record<LifecycleCommand, WriteOperation> = {
    pause: commandOperation('pause'),
    resume: commandOperation('resume'),
    close: commandOperation('close'),
    reopen: commandOperation('reopen'),
  }

  return {
    put,
    readInTx,
    view,

    get(clientCode: string, id: string) {
      return readInTx(store, clientCode, id)
    },

    async list(clientCode: string, q: { cursor?: string | undefined; limit: number; status?: ReceivableStatus | undefined }) {
      const after = decodeCursor(q.cursor, z.object({ after: z.string() }))
      if (q.cursor !== undefined && !after) throw fieldProblem('/query/cursor', 'invalid_format', 'is not a cursor this list returned')
      const rows = await listReceivables(store, clientCode, { after: after?.after, status: q.status, limit: q.limit + 1 })
      const page = rows.slice(0, q.limit)
      const last = page.at(-1)
      return {
        data: page.map(view),
        nextCursor: rows.length > q.limit && last ? encodeCursor({ after: last.external_receivable_id }) : null,
      }
    },

    commands,

    /** pause, resume, close, reopen: the command's write operation in its own transaction. */
    command(clientCode: string, grant: Grant, id: string, command: LifecycleCommand, body: { effectiveAt: string; reason?: string }) {
      return executeWrite(deps, commands[command], { clientCode, grant, id }, body)
    },
  }
}
export type ReceivableService = ReturnType<typeof createReceivableService>
