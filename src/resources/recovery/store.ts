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
       INSERT INTO recovery_instructions (client_code, external_instruction_id, external_receivable_id, state, revision, effective_at, recorded_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7)
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

export async function restrictionsOf(tx: Tx, clientCode: string, subjectType: 'customer' | 'receivable', subjectId: string) {
  return tx.query<{ type: string; reference: string | null }>(
    'SELECT type, reference FROM restrictions WHERE client_code = $1 AND subject_type = $2 AND subject_id = $3 ORDER BY type',
    [clientCode, subjectType, subjectId],
  )
}

/** Replaces the subject's restrictions with `next` (already sorted by type). */
export async function replaceRestrictions(
  tx: Tx,
  clientCode: string,
  subjectType: 'customer' | 'receivable',
  subjectId: string,
  next: readonly { type: string; reference: string | null }[],
): Promise<void> {
  await tx.query('DELETE FROM restrictions WHERE client_code = $1 AND subject_type = $2 AND subject_id = $3', [
    clientCode,
    subjectType,
    subjectId,
  ])
  if (next.length > 0) {
    await tx.query(
      `INSERT INTO restrictions (client_code, subject_type, subject_id, type, reference)
       SELECT $1, $2, $3, t, r FROM unnest($4::text[], $5::text[]) AS x(t, r)`,
      [clientCode, subjectType, subjectId, next.map((r) => r.type), next.map((r) => r.reference)],
    )
  }
}

export async function receivablesOfCustomer(tx: Tx, clientCode: string, customerId: string): Promise<string[]> {
  const rows = await tx.query<{ external_receivable_id: string }>(
    'SELECT external_receivable_id FROM receivable_customers WHERE client_code = $1 AND external_customer_id = $2 ORDER BY 1',
    [clientCode, customerId],
  )
  return rows.map((r) => r.external_receivable_id)
}

/**
 * The service's own revision of the authorized instructions of these Receivables (all of them, or only those a
 * restriction or Dispute now protects): suspended, revision + 1, recorded in the history with why.
 */
export async function suspendInstructions(
  tx: Tx,
  clientCode: string,
  receivableIds: readonly string[],
  now: string,
  cause: string,
  onlyRestricted: boolean,
): Promise<void> {
  if (receivableIds.length === 0) return
  await tx.query(
    `WITH s AS (
       UPDATE recovery_instructions ri SET state = 'suspended', revision = ri.revision + 1, recorded_at = $3
         FROM receivable_hold_facts h
        WHERE ri.client_code = $1 AND ri.external_receivable_id = ANY($2::text[]) AND ri.state = 'authorized'
          AND h.client_code = ri.client_code AND h.external_receivable_id = ri.external_receivable_id
          AND (NOT $4::boolean OR h.has_dispute OR h.has_source_restriction)
        RETURNING ri.external_instruction_id, ri.revision, ri.effective_at)
     INSERT INTO recovery_instruction_history (client_code, external_instruction_id, revision, state, actor, cause, effective_at, recorded_at)
     SELECT $1, s.external_instruction_id, s.revision, 'suspended', 'service', $5, s.effective_at, $3 FROM s`,
    [clientCode, receivableIds, now, onlyRestricted, cause],
  )
}
