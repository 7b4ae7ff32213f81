import type { Queryable, Tx } from '../../store/store.ts'

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

/** The status of each listed batch that exists. */
export async function batchStatuses(db: Queryable, clientCode: string, batches: readonly string[]): Promise<Map<string, string>> {
  const rows = await db.query<{ external_batch_id: string; status: string }>(
    'SELECT external_batch_id, status FROM batches WHERE client_code = $1 AND external_batch_id = ANY($2::text[])',
    [clientCode, batches],
  )
  return new Map(rows.map((b) => [b.external_batch_id, b.status]))
}

export async function lastDeclaredPosition(db: Queryable, clientCode: string): Promise<string | null> {
  const rows = await db.query<{ max: string | null }>(
    'SELECT max(source_position)::text AS max FROM book_completions WHERE client_code = $1',
    [clientCode],
  )
  return rows[0]?.max ?? null
}

/** Receivables written successfully by the listed batches. */
export async function countCovered(db: Queryable, clientCode: string, batches: readonly string[]): Promise<number> {
  const rows = await db.query<{ n: number }>(
    `SELECT count(DISTINCT external_id)::int AS n FROM batch_records
      WHERE client_code = $1 AND external_batch_id = ANY($2::text[]) AND kind = 'receivable' AND status = 'succeeded'`,
    [clientCode, batches],
  )
  return rows[0]?.n ?? 0
}

export async function insertCompletion(
  tx: Tx,
  clientCode: string,
  id: string,
  body: { batches: string[]; sourcePosition: number },
  coveredCount: number,
  now: string,
): Promise<void> {
  await tx.query(
    `INSERT INTO book_completions (client_code, external_completion_id, body, source_position, covered_count, omitted_count, accepted_at)
     VALUES ($1, $2, $3, $4, $5, 0, $6)`,
    [clientCode, id, JSON.stringify(body), body.sourcePosition, coveredCount, now],
  )
}

/**
 * Flags every non-closed Receivable the listed batches did not cover, and records how many on the declaration.
 * `newly_held`: the flag changes its holds (an active Receivable not already flagged).
 */
export async function flagOmissions(tx: Tx, clientCode: string, id: string, batches: readonly string[], now: string) {
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
       SELECT $1, $3, external_receivable_id, $4 FROM omitted),
     counted AS (
       UPDATE book_completions SET omitted_count = (SELECT count(*) FROM omitted)
        WHERE client_code = $1 AND external_completion_id = $3)
     SELECT external_receivable_id, newly_held FROM omitted`,
    [clientCode, batches, id, now],
  )
  return flagged
}

/** The family's store functions, for the factories that receive them as a `Pick<>`. */
export const bookStore = {
  findCompletion,
  omissionsPage,
  batchStatuses,
  lastDeclaredPosition,
  countCovered,
  insertCompletion,
  flagOmissions,
}
export type BookStore = typeof bookStore
