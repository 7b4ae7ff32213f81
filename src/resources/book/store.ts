import type { Queryable, Tx } from '../../store/store.ts'

/**
 * Releases every held omission of these Receivables (the Source wrote or closed them). Returns true when
 * at least one was held: the Receivable's holds changed.
 */
export async function releaseOmissions(tx: Tx, clientCode: string, receivableIds: readonly string[], now: string): Promise<boolean> {
  const rows = await tx.query(
    `UPDATE book_omissions SET released_at = $3
      WHERE client_code = $1 AND external_receivable_id = ANY($2::text[]) AND released_at IS NULL RETURNING 1`,
    [clientCode, receivableIds, now],
  )
  return rows.length > 0
}

export interface CompletionRow {
  external_completion_id: string
  body: { asOf: string; sourcePosition: number; batches: string[] }
  source_position: string
  covered_count: number
  omitted_count: number
  accepted_at: string
}

export async function findCompletion(db: Queryable, clientCode: string, id: string): Promise<CompletionRow | undefined> {
  return (
    await db.query<CompletionRow>(
      `SELECT external_completion_id, body, source_position, covered_count, omitted_count, accepted_at
         FROM book_completions WHERE client_code = $1 AND external_completion_id = $2`,
      [clientCode, id],
    )
  )[0]
}

export async function omissionsPage(db: Queryable, clientCode: string, id: string, limit: number) {
  return db.query<{ external_receivable_id: string; flagged_at: string; released_at: string | null }>(
    `SELECT external_receivable_id, flagged_at, released_at FROM book_omissions
      WHERE client_code = $1 AND external_completion_id = $2 ORDER BY external_receivable_id LIMIT $3`,
    [clientCode, id, limit],
  )
}
