import { holdColumns } from '../../domain/holds.ts'
import type { Queryable, QueryOptions, Tx } from '../../store/store.ts'
import type { ReceivableWrite } from './schema.ts'

/**
 * The write path's statements whose text never varies are prepared by name on each PostgreSQL connection
 * (`QueryOptions.prepared`): planned once per connection instead of at every run (docs/performance.md).
 */
const PREPARED: QueryOptions = { prepared: true }

export type ReceivableStatus = 'active' | 'paused' | 'closed'

export interface ReceivableRow {
  external_receivable_id: string
  revision: string
  status: ReceivableStatus
  source_revision: string
  currency: string
  source_amount_minor: string
  confirmed_unreconciled_minor: string
  receipt_acknowledged_minor: string
  acknowledged_undeclared_minor: string
  representation: ReceivableWrite
  updated_at: string
  instruction_state: 'authorized' | 'withdrawn' | 'suspended' | 'none'
  /** hold_<category> booleans (src/domain/holds.ts) */
  [hold: `hold_${string}`]: boolean
}

/** The Receivable with its holds, from the one definition of holds over receivable_hold_facts. */
function select() {
  return `SELECT r.external_receivable_id, r.revision, r.status, r.source_revision, r.currency, r.source_amount_minor,
       r.confirmed_unreconciled_minor, r.receipt_acknowledged_minor, r.acknowledged_undeclared_minor, r.representation, r.updated_at, h.instruction_state,
       ${holdColumns()}
  FROM receivables r
  JOIN receivable_hold_facts h ON h.client_code = r.client_code AND h.external_receivable_id = r.external_receivable_id`
}

export async function findReceivable(db: Queryable, clientCode: string, id: string): Promise<ReceivableRow | undefined> {
  return (
    await db.query<ReceivableRow>(`${select()} WHERE r.client_code = $1 AND r.external_receivable_id = $2`, [clientCode, id], PREPARED)
  )[0]
}

/** Several Receivables with their holds, by identifier (those that exist), in one statement. */
export async function findReceivables(db: Queryable, clientCode: string, ids: readonly string[]): Promise<ReceivableRow[]> {
  return db.query<ReceivableRow>(`${select()} WHERE r.client_code = $1 AND r.external_receivable_id = ANY($2::text[])`, [clientCode, ids])
}

/** The stored row without holds: for rules that need only the Receivable's own columns (cheap). */
export interface ReceivableCore {
  external_receivable_id: string
  revision: string
  status: ReceivableStatus
  source_revision: string
  currency: string
  source_amount_minor: string
  representation: ReceivableWrite
}

export async function findReceivableCore(db: Queryable, clientCode: string, id: string): Promise<ReceivableCore | undefined> {
  return (
    await db.query<ReceivableCore>(
      `SELECT external_receivable_id, revision, status, source_revision, currency, source_amount_minor, representation
         FROM receivables WHERE client_code = $1 AND external_receivable_id = $2`,
      [clientCode, id],
    )
  )[0]
}

export async function listReceivables(
  db: Queryable,
  clientCode: string,
  opts: { after?: string | undefined; status?: ReceivableStatus | undefined; limit: number },
): Promise<ReceivableRow[]> {
  return db.query<ReceivableRow>(
    `${select()} WHERE r.client_code = $1 AND ($2::text IS NULL OR r.external_receivable_id > $2) AND ($3::text IS NULL OR r.status = $3)
      ORDER BY r.external_receivable_id LIMIT $4`,
    [clientCode, opts.after ?? null, opts.status ?? null, opts.limit],
  )
}

/** One Receivable write of a set-based run: its identity, its body, the declared balance in minor units. */
export interface ReceivableWriteItem {
  id: string
  body: ReceivableWrite
  amountMinor: bigint
}

/** What `insertReceivablesIfNew` found or did for one Receivable. */
export interface ReceivableInsertResult {
  created: boolean
  /** Which of its responsible Customers exist (the caller reports the missing ones). */
  knownCustomers: Set<string>
  /** The Receivable's own columns when it existed before the statement. */
  existing: ReceivableCore | undefined
  /** An existing Receivable has a held complete-book omission (a retry of it releases it: a change of holds). */
  heldOmission: boolean
}

/**
 * `insertReceivableIfNew` for many Receivables in one statement (distinct identities): each one that does not
 * exist and whose responsible Customers all exist is created with its Customer links; every one is returned
 * with its known Customers, its existing row's own columns and whether it has a held omission.
 *
 * The Customers and the existing rows are looked up per identity (`LATERAL … LIMIT 1`, one primary-key probe
 * each) rather than joined: the statement is prepared, and a generic plan made before the tables were analyzed
 * joined them as a hash over every row of the client, a cost that grew with the client's book (measured with
 * `EXPLAIN` on PGlite: 2.0 ms at 300 Receivables against 0.3 ms by key; docs/performance.md, session 20).
 */
export async function insertReceivablesIfNew(
  tx: Tx,
  clientCode: string,
  items: readonly ReceivableWriteItem[],
  now: string,
): Promise<Map<string, ReceivableInsertResult>> {
  const rows = await tx.query<{ id: string; created: boolean; known: string[] | null; existing: ReceivableCore | null; held: boolean }>(
    `WITH input AS (
       SELECT * FROM jsonb_to_recordset($2::jsonb)
                  AS t(id text, source_revision bigint, currency text, amount bigint, representation jsonb, wanted int)),
     link AS (SELECT * FROM jsonb_to_recordset($3::jsonb) AS t(id text, customer text, role text)),
     known AS (
       SELECT l.id, array_agg(DISTINCT c.external_customer_id) AS ids, count(DISTINCT c.external_customer_id)::int AS n
         FROM link l CROSS JOIN LATERAL (
                SELECT c.external_customer_id FROM customers c
                 WHERE c.client_code = $1 AND c.external_customer_id = l.customer LIMIT 1) c
        GROUP BY l.id),
     r AS (
       INSERT INTO receivables (client_code, external_receivable_id, revision, status, source_revision, currency, source_amount_minor,
                                representation, created_at, updated_at)
       SELECT $1, i.id, 1, 'active', i.source_revision, i.currency, i.amount, i.representation, $4, $4
         FROM input i LEFT JOIN known k ON k.id = i.id WHERE COALESCE(k.n, 0) = i.wanted
       ON CONFLICT (client_code, external_receivable_id) DO NOTHING
       RETURNING external_receivable_id),
     rc AS (
       INSERT INTO receivable_customers (client_code, external_customer_id, external_receivable_id, role)
       SELECT $1, l.customer, l.id, l.role FROM link l JOIN r ON r.external_receivable_id = l.id)
     SELECT i.id, r.external_receivable_id IS NOT NULL AS created, k.ids AS known,
            CASE WHEN e.external_receivable_id IS NULL THEN NULL ELSE
              json_build_object('external_receivable_id', e.external_receivable_id, 'revision', e.revision::text,
                'status', e.status, 'source_revision', e.source_revision::text, 'currency', e.currency,
                'source_amount_minor', e.source_amount_minor::text, 'representation', e.representation) END AS existing,
            e.external_receivable_id IS NOT NULL AND EXISTS (
              SELECT 1 FROM book_omissions o
               WHERE o.client_code = $1 AND o.external_receivable_id = i.id AND o.released_at IS NULL) AS held
       FROM input i
       LEFT JOIN r ON r.external_receivable_id = i.id
       LEFT JOIN known k ON k.id = i.id
       LEFT JOIN LATERAL (
              SELECT e.external_receivable_id, e.revision, e.status, e.source_revision, e.currency, e.source_amount_minor, e.representation
                FROM receivables e WHERE e.client_code = $1 AND e.external_receivable_id = i.id LIMIT 1) e ON true`,
    [
      clientCode,
      JSON.stringify(
        items.map((it) => ({
          id: it.id,
          source_revision: it.body.sourceRevision,
          currency: it.body.recoverableAmount.currency,
          amount: it.amountMinor.toString(),
          representation: it.body,
          wanted: it.body.responsibleCustomers.length,
        })),
      ),
      JSON.stringify(
        items.flatMap((it) => it.body.responsibleCustomers.map((c) => ({ id: it.id, customer: c.externalCustomerId, role: c.role }))),
      ),
      now,
    ],
    PREPARED,
  )
  return new Map(
    rows.map((r) => [
      r.id,
      { created: r.created, knownCustomers: new Set(r.known ?? []), existing: r.existing ?? undefined, heldOmission: r.held },
    ]),
  )
}

/**
 * `replaceReceivable` for many Receivables in one statement (distinct identities): new representations and
 * source amounts (acknowledged-undeclared money cleared, every Payment's share with it by one more declaration
 * counted: each is a declaration; payments/take-back.ts), the responsible Customers follow
 * each body, held omissions released. Returns the new revisions.
 */
export async function replaceReceivables(
  tx: Tx,
  clientCode: string,
  items: readonly ReceivableWriteItem[],
  now: string,
): Promise<Map<string, number>> {
  if (items.length === 0) return new Map()
  const links = items.flatMap((it) => it.body.responsibleCustomers.map((c) => [it.id, c.externalCustomerId, c.role] as const))
  const rows = await tx.query<{ external_receivable_id: string; revision: string }>(
    `WITH input AS (
       SELECT * FROM unnest($2::text[], $3::text[], $4::bigint[], $5::bigint[]) AS t(id, representation, source_revision, amount)),
     link AS (SELECT * FROM unnest($6::text[], $7::text[], $8::text[]) AS t(id, customer, role)),
     gone AS (
       DELETE FROM receivable_customers rc USING input i
        WHERE rc.client_code = $1 AND rc.external_receivable_id = i.id
          AND NOT EXISTS (SELECT 1 FROM link l WHERE l.id = i.id AND l.customer = rc.external_customer_id)),
     kept AS (
       INSERT INTO receivable_customers (client_code, external_customer_id, external_receivable_id, role)
       SELECT $1, l.customer, l.id, l.role FROM link l
       ON CONFLICT (client_code, external_customer_id, external_receivable_id) DO UPDATE SET role = EXCLUDED.role),
     released AS (
       UPDATE book_omissions o SET released_at = $9 FROM input i
        WHERE o.client_code = $1 AND o.external_receivable_id = i.id AND o.released_at IS NULL)
     UPDATE receivables r SET representation = i.representation::jsonb, source_revision = i.source_revision,
            source_amount_minor = i.amount, acknowledged_undeclared_minor = 0, declarations = r.declarations + 1,
            revision = r.revision + 1, updated_at = $9
       FROM input i WHERE r.client_code = $1 AND r.external_receivable_id = i.id
     RETURNING r.external_receivable_id, r.revision`,
    [
      clientCode,
      items.map((it) => it.id),
      items.map((it) => JSON.stringify(it.body)),
      items.map((it) => it.body.sourceRevision),
      items.map((it) => it.amountMinor.toString()),
      links.map((l) => l[0]),
      links.map((l) => l[1]),
      links.map((l) => l[2]),
      now,
    ],
    PREPARED,
  )
  return new Map(rows.map((r) => [r.external_receivable_id, Number(r.revision)]))
}

/**
 * A Source replace, in one statement: new representation, the declared balance becomes the source amount (a
 * declaration: it includes every receipt acknowledged before, so acknowledged-undeclared money returns to zero, and
 * every Payment's share of it with one more declaration counted: payments/take-back.ts),
 * the responsible Customers follow the body (those no longer listed removed, the others upserted) and every
 * held complete-book omission of the Receivable is released (the Source wrote it again).
 */
export async function replaceReceivable(tx: Tx, clientCode: string, id: string, body: ReceivableWrite, amountMinor: bigint, now: string) {
  await tx.query(
    `WITH u AS (
       UPDATE receivables SET representation = $3, source_revision = $4, source_amount_minor = $5,
              acknowledged_undeclared_minor = 0, declarations = declarations + 1, revision = revision + 1, updated_at = $6
        WHERE client_code = $1 AND external_receivable_id = $2),
     gone AS (
       DELETE FROM receivable_customers
        WHERE client_code = $1 AND external_receivable_id = $2 AND NOT (external_customer_id = ANY($7::text[]))),
     kept AS (
       INSERT INTO receivable_customers (client_code, external_customer_id, external_receivable_id, role)
       SELECT $1, c, $2, r FROM unnest($7::text[], $8::text[]) AS t(c, r)
       ON CONFLICT (client_code, external_customer_id, external_receivable_id) DO UPDATE SET role = EXCLUDED.role)
     UPDATE book_omissions SET released_at = $6
      WHERE client_code = $1 AND external_receivable_id = $2 AND released_at IS NULL`,
    [
      clientCode,
      id,
      JSON.stringify(body),
      body.sourceRevision,
      amountMinor.toString(),
      now,
      body.responsibleCustomers.map((c) => c.externalCustomerId),
      body.responsibleCustomers.map((c) => c.role),
    ],
  )
}

export async function setStatus(
  tx: Tx,
  clientCode: string,
  id: string,
  status: ReceivableStatus,
  reason: string | null,
  effectiveAt: string,
  now: string,
) {
  const rows = await tx.query<{ revision: string }>(
    `UPDATE receivables SET status = $3, status_reason = $4, status_effective_at = $5, revision = revision + 1, updated_at = $6
      WHERE client_code = $1 AND external_receivable_id = $2 RETURNING revision`,
    [clientCode, id, status, reason, effectiveAt, now],
  )
  return Number(rows[0]?.revision)
}

export async function existingReceivables(
  db: Queryable,
  clientCode: string,
  ids: readonly string[],
): Promise<Map<string, { currency: string }>> {
  const rows = await db.query<{ external_receivable_id: string; currency: string }>(
    'SELECT external_receivable_id, currency FROM receivables WHERE client_code = $1 AND external_receivable_id = ANY($2::text[])',
    [clientCode, ids],
  )
  return new Map(rows.map((r) => [r.external_receivable_id, { currency: r.currency }]))
}

/** The family's store functions, for the factories that receive them as a `Pick<>`. */
export const receivableStore = {
  findReceivable,
  findReceivables,
  findReceivableCore,
  listReceivables,
  insertReceivablesIfNew,
  replaceReceivable,
  replaceReceivables,
  setStatus,
  existingReceivables,
}
export type ReceivableStore = typeof receivableStore
