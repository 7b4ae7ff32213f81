import { z } from 'zod'
import { canonicalJson } from '../../domain/canonical.ts'
import { holdsFromRow } from '../../domain/holds.ts'
import { money, toMinor } from '../../domain/money.ts'
import { fieldProblem, Problem, unknownReferences } from '../../domain/problems.ts'
import { type Clock, isoNow } from '../../domain/time.ts'
import { decodeCursor, encodeCursor } from '../../http/common-schemas.ts'
import { lockIdentity } from '../../store/locks.ts'
import type { Queryable, Store, Tx } from '../../store/store.ts'
import { releaseOmissions } from '../book/store.ts'
import { appendChange } from '../changes/store.ts'
import { existingCustomerIds } from '../customers/store.ts'
import { defineOperation, type OperationContext } from '../operations.ts'
import { applyRestrictionChange, suspendInstructionsOf, syncRestrictions } from '../recovery/restrictions.ts'
import { type ReceivableResponse, ReceivableWrite } from './schema.ts'
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

export interface ReceivableServiceDeps {
  store: Store
  clock: Clock
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

export function createReceivableService({ store, clock }: ReceivableServiceDeps) {
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
    async run(tx: Tx, { clientCode, grant, id }: OperationContext, body: ReceivableWrite) {
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
      const { created, knownCustomers } = await insertReceivableIfNew(tx, clientCode, id, body, amount, now)
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
        appendChange(tx, clientCode, {
          type: 'receivable.created',
          resourceType: 'receivable',
          resourceId: id,
          revision: 1,
          occurredAt: now,
        })
        return { status: 201 as const, body: () => readInTx(tx, clientCode, id) }
      }
      const existing = (await findReceivableCore(tx, clientCode, id)) as ReceivableCore
      const current = Number(existing.source_revision)
      if (body.sourceRevision === current && canonicalJson(body) === canonicalJson(existing.representation)) {
        // The Source wrote it again: a complete-book omission is released (a change of holds).
        if (await releaseOmissions(tx, clientCode, [id], now)) {
          await bumpAndRecord(tx, clientCode, id, now)
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
      await replaceReceivable(tx, clientCode, id, body, amount, now)
      await releaseOmissions(tx, clientCode, [id], now)
      // Its own revision moved with the replace; a restriction raised here still suspends its instruction.
      const restrictionsChanged =
        canonicalJson(sortRestrictions(body.restrictions)) !== canonicalJson(sortRestrictions(existing.representation.restrictions))
      if (restrictionsChanged)
        await applyRestrictionChange(
          tx,
          clientCode,
          [id],
          now,
          async () => {
            await syncRestrictions(tx, clientCode, 'receivable', id, body.restrictions ?? [])
          },
          new Set([id]),
        )
      appendChange(tx, clientCode, {
        type: 'receivable.updated',
        resourceType: 'receivable',
        resourceId: id,
        revision: Number(existing.revision) + 1,
        occurredAt: now,
      })
      return { status: 200 as const, body: () => readInTx(tx, clientCode, id) }
    },
  })

  async function bumpAndRecord(tx: Tx, clientCode: string, id: string, now: string) {
    const revision = await bumpRevision(tx, clientCode, id, now)
    appendChange(tx, clientCode, {
      type: 'receivable.updated',
      resourceType: 'receivable',
      resourceId: id,
      revision,
      occurredAt: now,
    })
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

    /** pause, resume, close, reopen. Reopen never resumes recovery: it suspends an authorized instruction. */
    command(clientCode: string, id: string, command: LifecycleCommand, body: { effectiveAt: string; reason?: string }) {
      return store.transaction(async (tx) => {
        await lockIdentity(tx, clientCode, 'receivable', id)
        const row = await findReceivable(tx, clientCode, id)
        if (!row) throw receivableNotFound(id)
        const t = TRANSITIONS[command]
        if (!(t.from as readonly string[]).includes(row.status)) {
          throw new Problem('receivable_state_conflict', `Cannot ${command} a Receivable that is ${row.status}.`, {
            extensions: { currentStatus: row.status },
          })
        }
        const now = isoNow(clock)
        await setStatus(tx, clientCode, id, t.to, body.reason ?? null, body.effectiveAt, now)
        if (command === 'close') await releaseOmissions(tx, clientCode, [id], now)
        // Reopening never resumes recovery by itself: an authorized instruction is suspended and needs a
        // new revision from the Source (spec, Receivable status table).
        if (command === 'reopen') await suspendInstructionsOf(tx, clientCode, [id], now, 'receivable_reopened')
        const after = await readInTx(tx, clientCode, id)
        appendChange(tx, clientCode, {
          type: 'receivable.updated',
          resourceType: 'receivable',
          resourceId: id,
          revision: after.revision,
          occurredAt: now,
        })
        return after
      })
    },
  }
}

export type ReceivableService = ReturnType<typeof createReceivableService>
