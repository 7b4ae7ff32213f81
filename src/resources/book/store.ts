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

/**
 * What a declaration of `$2` (the listed batches) does to the book of client `$1`, as common table expressions
 * shared by the declaration and its preview, so the two cannot disagree (docs/decisions.md, "Previewing a complete
 * book"): `covered`, the Receivables the batches wrote successfully; `omitted`, every other non-closed Receivable
 * (it is flagged; `newly_held`: the flag changes its holds, an active Receivable not already flagged); `releasing`,
 * the covered Receivables an earlier declaration flagged and that are still held (the declaration releases them;
 * `unheld`: the release changes its holds, an active Receivable).
 */
const DECLARATION_PLAN = `covered AS (
       SELECT DISTINCT external_id FROM batch_records
        WHERE client_code = $1 AND external_batch_id = ANY($2::text[]) AND kind = 'receivable' AND status = 'succeeded'),
     omitted AS (
       SELECT r.external_receivable_id, r.status = 'active' AND NOT EXISTS (
                SELECT 1 FROM book_omissions o WHERE o.client_code = $1
                   AND o.external_receivable_id = r.external_receivable_id AND o.released_at IS NULL) AS newly_held
         FROM receivables r
        WHERE r.client_code = $1 AND r.status <> 'closed'
          AND r.external_receivable_id NOT IN (SELECT external_id FROM covered)),
     releasing AS (
       SELECT r.external_receivable_id, r.status = 'active' AS unheld
         FROM receivables r
        WHERE r.client_code = $1 AND r.external_receivable_id IN (SELECT external_id FROM covered)
          AND EXISTS (SELECT 1 FROM book_omissions o WHERE o.client_code = $1
                         AND o.external_receivable_id = r.external_receivable_id AND o.released_at IS NULL))`

/** Receivables written successfully by the listed batches. */
export async function countCovered(db: Queryable, clientCode: string, batches: readonly string[]): Promise<number> {
  const rows = await db.query<{ n: number }>(`WITH ${DECLARATION_PLAN} SELECT count(*)::int AS n FROM covered`, [clientCode, batches])
  return Number(rows[0]?.n ?? 0)
}

export interface DeclarationPreviewRow {
  covered_count: number
  omitted_count: number
  released_count: number
  /** The first `limit` omitted Receivables by id, the order the declaration's GET lists its omissions in. */
  omissions: { id: string; newly_held: boolean }[]
  releases: string[]
}

/** What declaring `batches` would flag and release, read in one statement; nothing is written. */
export async function previewDeclaration(
  db: Queryable,
  clientCode: string,
  batches: readonly string[],
  limit: number,
): Promise<DeclarationPreviewRow> {
  const rows = await db.query<DeclarationPreviewRow>(
    `WITH ${DECLARATION_PLAN}
     SELECT (SELECT count(*) FROM covered)::int AS covered_count,
            (SELECT count(*) FROM omitted)::int AS omitted_count,
            (SELECT count(*) FROM releasing)::int AS released_count,
            COALESCE((SELECT json_agg(json_build_object('id', p.external_receivable_id, 'newly_held', p.newly_held)
                                      ORDER BY p.external_receivable_id)
                        FROM (SELECT * FROM omitted ORDER BY external_receivable_id LIMIT $3) p), '[]'::json) AS omissions,
            COALESCE((SELECT json_agg(p.external_receivable_id ORDER BY p.external_receivable_id)
                        FROM (SELECT * FROM releasing ORDER BY external_receivable_id LIMIT $3) p), '[]'::json) AS releases`,
    [clientCode, batches, limit],
  )
  const row = rows[0] as DeclarationPreviewRow
  return {
    ...row,
    covered_count: Number(row.covered_count),
    omitted_count: Number(row.omitted_count),
    released_count: Number(row.released_count),
  }
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
 * Does what DECLARATION_PLAN says, in one statement: flags every non-closed Receivable the listed batches did not
 * cover, records how many on the declaration, and releases the held omissions of the Receivables they did cover.
 * Returns the Receivables whose holds change: `newly_held` flagged ones and `unheld` released ones.
 */
export async function flagOmissions(tx: Tx, clientCode: string, id: string, batches: readonly string[], now: string) {
  const rows = await tx.query<{ external_receivable_id: string; changed: boolean }>(
    `WITH ${DECLARATION_PLAN},
     ins AS (
       INSERT INTO book_omissions (client_code, external_completion_id, external_receivable_id, flagged_at)
       SELECT $1, $3, external_receivable_id, $4 FROM omitted),
     counted AS (
       UPDATE book_completions SET omitted_count = (SELECT count(*) FROM omitted)
        WHERE client_code = $1 AND external_completion_id = $3),
     released AS (
       UPDATE book_omissions SET released_at = $4
        WHERE client_code = $1 AND released_at IS NULL AND external_receivable_id IN (SELECT external_receivable_id FROM releasing))
     SELECT external_receivable_id, newly_held AS changed FROM omitted
     UNION ALL
     SELECT external_receivable_id, unheld AS changed FROM releasing`,
    [clientCode, batches, id, now],
  )
  return rows.filter((r) => r.changed).map((r) => r.external_receivable_id)
}

/** The family's store functions, for the factories that receive them as a `Pick<>`. */
export const bookStore = {
  findCompletion,
  omissionsPage,
  batchStatuses,
  lastDeclaredPosition,
  countCovered,
  previewDeclaration,
  insertCompletion,
  flagOmissions,
}
export type BookStore = typeof bookStore
