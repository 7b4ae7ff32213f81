import type { NewestFirstKey } from '../../domain/cursor.ts'
import { newestFirst } from '../../store/newest-first.ts'
import type { Queryable, Tx } from '../../store/store.ts'

export interface InstructionRow {
  external_instruction_id: string
  external_receivable_id: string
  state: 'authorized' | 'withdrawn' | 'suspended'
  revision: string
  effective_at: string
  recorded_at: string
}

export async function findInstruction(db: Queryable, clientCode: string, id: string): Promise<InstructionRow | undefined> {
  return (
    await db.query<InstructionRow>(
      `SELECT external_instruction_id, external_receivable_id, state, revision, effective_at, recorded_at
         FROM recovery_instructions WHERE client_code = $1 AND external_instruction_id = $2`,
      [clientCode, id],
    )
  )[0]
}

/**
 * A page of the client's instructions, newest first by creation (created_at: recorded_at moves with every
 * revision), optionally the one governing a Receivable: an index range scan of recovery_instructions_created, or
 * the unique (client_code, external_receivable_id) probe.
 */
export async function listInstructions(
  db: Queryable,
  clientCode: string,
  q: { after: NewestFirstKey | undefined; receivableId: string | undefined; limit: number },
): Promise<(InstructionRow & { list_at: string })[]> {
  const params: unknown[] = [clientCode, q.limit]
  let filter = ''
  if (q.receivableId !== undefined) {
    params.push(q.receivableId)
    filter = ` AND external_receivable_id = $${params.length}`
  }
  const page = newestFirst('created_at', 'external_instruction_id', q.after, params)
  return db.query(
    `SELECT external_instruction_id, external_receivable_id, state, revision, effective_at, recorded_at, ${page.listAt}
       FROM recovery_instructions WHERE client_code = $1${filter}${page.where} ${page.order} LIMIT $2`,
    params,
  )
}

/** The instruction that governs this Receivable, if any (one instruction governs one Receivable). */
export async function instructionGoverning(db: Queryable, clientCode: string, receivableId: string): Promise<string | undefined> {
  const rows = await db.query<{ external_instruction_id: string }>(
    'SELECT external_instruction_id FROM recovery_instructions WHERE client_code = $1 AND external_receivable_id = $2',
    [clientCode, receivableId],
  )
  return rows[0]?.external_instruction_id
}

/** A Source revision of an instruction and its history row; returns the instruction as stored. */
export async function writeInstruction(
  tx: Tx,
  clientCode: string,
  id: string,
  w: { receivableId: string; state: string; revision: number; effectiveAt: string; now: string },
): Promise<InstructionRow> {
  const rows = await tx.query<InstructionRow>(
    `WITH i AS (
       INSERT INTO recovery_instructions (client_code, external_instruction_id, external_receivable_id, state, revision, effective_at, recorded_at,
                                          created_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $7)
       ON CONFLICT (client_code, external_instruction_id) DO UPDATE SET state = $4, revision = $5, effective_at = $6, recorded_at = $7
       RETURNING external_instruction_id, external_receivable_id, state, revision, effective_at, recorded_at),
     h AS (
       INSERT INTO recovery_instruction_history (client_code, external_instruction_id, revision, state, actor, cause, effective_at, recorded_at)
       VALUES ($1, $2, $5, $4, 'source', 'instruction_put', $6, $7))
     SELECT * FROM i`,
    [clientCode, id, w.receivableId, w.state, w.revision, w.effectiveAt, w.now],
  )
  return rows[0] as InstructionRow
}
