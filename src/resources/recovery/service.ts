import { holdsFromRow } from '../../domain/holds.ts'
import { Problem, unknownReferences } from '../../domain/problems.ts'
import { type Clock, isoNow } from '../../domain/time.ts'
import type { Grant } from '../../http/auth.ts'
import { lockIdentity } from '../../store/locks.ts'
import type { Queryable, Store, Tx } from '../../store/store.ts'
import { findReceivable } from '../receivables/store.ts'
import { holdSnapshot, recordHoldChanges } from './restrictions.ts'
import type { InstructionResponse, InstructionWrite } from './schema.ts'

interface InstructionRow {
  external_instruction_id: string
  external_receivable_id: string
  state: 'authorized' | 'withdrawn' | 'suspended'
  revision: string
  effective_at: string
  recorded_at: string
}

async function findInstruction(db: Queryable, clientCode: string, id: string): Promise<InstructionRow | undefined> {
  return (
    await db.query<InstructionRow>(
      `SELECT external_instruction_id, external_receivable_id, state, revision, effective_at, recorded_at
         FROM recovery_instructions WHERE client_code = $1 AND external_instruction_id = $2`,
      [clientCode, id],
    )
  )[0]
}

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

export function createRecoveryService({ store, clock }: { store: Store; clock: Clock }) {
  async function view(db: Queryable, clientCode: string, row: InstructionRow): Promise<InstructionResponse> {
    const receivable = await findReceivable(db, clientCode, row.external_receivable_id)
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

  async function write(tx: Tx, clientCode: string, grant: Grant, id: string, body: InstructionWrite) {
    if (grant.recoveryEntryMode !== 'explicit_instruction') {
      throw new Problem(
        'recovery_mode_mismatch',
        'This connection uses approved_rules recovery entry; recovery instructions are not accepted.',
      )
    }
    const receivableId = body.scope.externalReceivableId
    await lockIdentity(tx, clientCode, 'instruction', id)
    await lockIdentity(tx, clientCode, 'receivable', receivableId)
    const existing = await findInstruction(tx, clientCode, id)
    if (existing && existing.external_receivable_id !== receivableId) {
      throw new Problem(
        'instruction_scope_conflict',
        `Instruction ${id} governs Receivable ${existing.external_receivable_id}; its scope cannot change.`,
      )
    }
    if (existing && body.revision === Number(existing.revision)) {
      if (body.state === existing.state && body.effectiveAt === existing.effective_at) {
        return { status: 200 as const, body: await view(tx, clientCode, existing) }
      }
      throw revisionConflict(Number(existing.revision) + 1, body.revision)
    }
    const receivable = await findReceivable(tx, clientCode, receivableId)
    if (!receivable) throw unknownReferences([{ pointer: '/scope/externalReceivableId', what: `Receivable ${receivableId}` }])
    if (!existing) {
      const other = await tx.query<{ external_instruction_id: string }>(
        'SELECT external_instruction_id FROM recovery_instructions WHERE client_code = $1 AND external_receivable_id = $2',
        [clientCode, receivableId],
      )
      if (other[0]) {
        throw new Problem(
          'instruction_scope_conflict',
          `Receivable ${receivableId} is already governed by instruction ${other[0].external_instruction_id}; one instruction governs one Receivable.`,
          { extensions: { externalInstructionId: other[0].external_instruction_id } },
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
    const before = await holdSnapshot(tx, clientCode, [receivableId])
    await tx.query(
      `INSERT INTO recovery_instructions (client_code, external_instruction_id, external_receivable_id, state, revision, effective_at, recorded_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7)
       ON CONFLICT (client_code, external_instruction_id) DO UPDATE SET state = $4, revision = $5, effective_at = $6, recorded_at = $7`,
      [clientCode, id, receivableId, body.state, body.revision, body.effectiveAt, now],
    )
    await tx.query(
      `INSERT INTO recovery_instruction_history (client_code, external_instruction_id, revision, state, actor, cause, effective_at, recorded_at)
       VALUES ($1, $2, $3, $4, 'source', 'instruction_put', $5, $6)`,
      [clientCode, id, body.revision, body.state, body.effectiveAt, now],
    )
    await recordHoldChanges(tx, clientCode, before, now)
    const row = (await findInstruction(tx, clientCode, id)) as InstructionRow
    return { status: existing ? (200 as const) : (201 as const), body: await view(tx, clientCode, row) }
  }

  return {
    put(clientCode: string, grant: Grant, id: string, body: InstructionWrite) {
      return store.transaction((tx) => write(tx, clientCode, grant, id, body))
    },
    async get(clientCode: string, id: string) {
      const row = await findInstruction(store, clientCode, id)
      if (!row) throw new Problem('recovery_instruction_not_found', `No recovery instruction ${id} for this client.`)
      return view(store, clientCode, row)
    },
  }
}

export type RecoveryService = ReturnType<typeof createRecoveryService>
