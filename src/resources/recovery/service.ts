import type { Grant } from '../../access/grants.ts'
import { newestFirstPage, readNewestFirstCursor } from '../../domain/cursor.ts'
import { holdsFromRow } from '../../domain/holds.ts'
import { Problem, unknownReferences } from '../../domain/problems.ts'
import { isoNow } from '../../domain/time.ts'
import { lockIdentity } from '../../store/locks.ts'
import type { Queryable } from '../../store/store.ts'
import { answersInOrder } from '../../store/transactions.ts'
import { defineOperation, grantOf, type OperationContext, type RouteDeps } from '../operations.ts'
import type { ReceivableRow, ReceivableStore } from '../receivables/store.ts'
import type { UnitOfWork } from '../unit-of-work.ts'
import { InstructionResponse, InstructionWrite } from './schema.ts'
import { findInstruction, type InstructionRow, instructionGoverning, listInstructions, writeInstruction } from './store.ts'

/** The spec's state table: from each state, the states a Source PUT may move to. Anything else is refused. */
const ALLOWED: Record<InstructionRow['state'] | 'none', readonly InstructionWrite['state'][]> = {
  none: ['authorized', 'withdrawn'],
  authorized: ['withdrawn'],
  withdrawn: ['authorized'],
  suspended: ['authorized'],
}

const revisionConflict = (expected: number, got: number) =>
  new Problem(
    'instruction_revision_conflict',
    `Expected revision ${expected}, got ${got}. Revisions start at 1 and increase by exactly 1.`,
    {
      extensions: { expectedRevision: expected },
    },
  )

export interface RecoveryServiceDeps extends RouteDeps {
  receivables: Pick<ReceivableStore, 'findReceivable' | 'findReceivables'>
}

export function createRecoveryService(deps: RecoveryServiceDeps) {
  const { store, clock } = deps
  const { findReceivable, findReceivables } = deps.receivables
  async function view(db: Queryable, clientCode: string, row: InstructionRow): Promise<InstructionResponse> {
    return viewOf(row, await findReceivable(db, clientCode, row.external_receivable_id))
  }

  /** The instruction with the holds of its Receivable as they are now (the GET and the list render through this). */
  function viewOf(row: InstructionRow, receivable: ReceivableRow | undefined): InstructionResponse {
    const holds = receivable ? holdsFromRow(receivable) : []
    return {
      externalInstructionId: row.external_instruction_id,
      scope: { type: 'receivable', externalReceivableId: row.external_receivable_id },
      state: row.state,
      revision: Number(row.revision),
      effectiveAt: row.effective_at,
      recordedAt: row.recorded_at,
      recoveryEntryMode: 'explicit_instruction',
      recoveryHeld: holds.length > 0,
      holds,
    }
  }

  async function write(uow: UnitOfWork, clientCode: string, grant: Grant, id: string, body: InstructionWrite) {
    const { tx } = uow
    if (grant.recoveryEntryMode !== 'explicit_instruction') {
      throw new Problem(
        'recovery_mode_mismatch',
        'This connection uses approved_rules recovery entry; recovery instructions are not accepted.',
      )
    }
    const receivableId = body.scope.externalReceivableId
    // Round trip one: both identity locks, then every read a decision below needs (the instruction, its Receivable
    // with its holds, the instruction already governing that Receivable, the holds watched before the write).
    const [, , existing, receivable, other] = await answersInOrder([
      lockIdentity(tx, clientCode, 'instruction', id),
      lockIdentity(tx, clientCode, 'receivable', receivableId),
      findInstruction(tx, clientCode, id),
      findReceivable(tx, clientCode, receivableId),
      instructionGoverning(tx, clientCode, receivableId),
      uow.watchHolds(clientCode, [receivableId]),
    ])
    if (existing && existing.external_receivable_id !== receivableId) {
      throw new Problem(
        'instruction_scope_conflict',
        `Instruction ${id} governs Receivable ${existing.external_receivable_id}; its scope cannot change.`,
      )
    }
    if (existing && body.revision === Number(existing.revision)) {
      if (body.state === existing.state && body.effectiveAt === existing.effective_at) {
        return { status: 200 as const, body: () => view(tx, clientCode, existing) }
      }
      throw revisionConflict(Number(existing.revision) + 1, body.revision)
    }
    if (!receivable) throw unknownReferences([{ pointer: '/scope/externalReceivableId', what: `Receivable ${receivableId}` }])
    if (!existing) {
      if (other) {
        throw new Problem(
          'instruction_scope_conflict',
          `Receivable ${receivableId} is already governed by instruction ${other}; one instruction governs one Receivable.`,
          { extensions: { externalInstructionId: other } },
        )
      }
    }
    const expected = existing ? Number(existing.revision) + 1 : 1
    if (body.revision !== expected) throw revisionConflict(expected, body.revision)
    const from = existing?.state ?? 'none'
    if (!ALLOWED[from].includes(body.state)) {
      throw new Problem('instruction_state_conflict', `A ${from} instruction cannot become ${body.state}.`, {
        extensions: { currentState: from },
      })
    }
    if (body.state === 'authorized' && (receivable.hold_dispute || receivable.hold_source_restriction)) {
      throw new Problem(
        'source_restriction_active',
        'The Source holds a restriction or Dispute on this Receivable or one of its Customers; recovery cannot be authorized until it is cleared.',
        { extensions: { holds: holdsFromRow(receivable).filter((h) => h === 'dispute' || h === 'source_restriction') } },
      )
    }
    const now = isoNow(clock)
    // Sent ahead: the holds after it (runOperation) travel with it, and its row is awaited by the render only.
    const written = uow.send((sending) =>
      writeInstruction(sending, clientCode, id, {
        receivableId,
        state: body.state,
        revision: body.revision,
        effectiveAt: body.effectiveAt,
        now,
      }),
    )
    // The render's read is sent before the row is awaited: COMMIT may leave with it (executeWrite).
    return {
      status: existing ? (200 as const) : (201 as const),
      body: async () => {
        const [row, after] = await answersInOrder([written, findReceivable(tx, clientCode, receivableId)])
        return viewOf(row, after)
      },
    }
  }

  /** A Source revision of a recovery instruction (or an identical retry). */
  const putOperation = defineOperation({
    kind: 'recovery_instruction',
    scopes: ['recovery_instructions:write'],
    body: InstructionWrite,
    response: InstructionResponse,
    source: true,
    run: (uow: UnitOfWork, ctx: OperationContext, body: InstructionWrite) => write(uow, ctx.clientCode, grantOf(ctx), ctx.id, body),
  })

  return {
    putOperation,
    async get(clientCode: string, id: string) {
      const row = await findInstruction(store, clientCode, id)
      if (!row) throw new Problem('recovery_instruction_not_found', `No recovery instruction ${id} for this client.`)
      return view(store, clientCode, row)
    },

    /** A page, newest first; each item exactly as its GET renders it (the Receivables' holds read in one statement). */
    async list(clientCode: string, q: { cursor?: string | undefined; limit: number; externalReceivableId?: string | undefined }) {
      const after = readNewestFirstCursor('recovery-instructions', q.cursor)
      const rows = await listInstructions(store, clientCode, { after, receivableId: q.externalReceivableId, limit: q.limit + 1 })
      const { page, nextCursor } = newestFirstPage('recovery-instructions', rows, q.limit, (r) => r.external_instruction_id)
      const receivables = new Map(
        (await findReceivables(store, clientCode, [...new Set(page.map((r) => r.external_receivable_id))])).map((r) => [
          r.external_receivable_id,
          r,
        ]),
      )
      return { data: page.map((r) => viewOf(r, receivables.get(r.external_receivable_id))), nextCursor }
    },
  }
}

export type RecoveryService = ReturnType<typeof createRecoveryService>
