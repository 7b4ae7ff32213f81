import type { Queryable, Tx } from '../store/store.ts'

export interface ClientRow {
  client_code: string
  name: string | null
  collection_enabled: boolean
  created_at: string
  updated_at: string
}

/** The client; `forUpdate` locks its row, which serializes the operator actions on one client across instances. */
export async function findClient(db: Queryable, clientCode: string, forUpdate = false): Promise<ClientRow | undefined> {
  return (await db.query<ClientRow>(`SELECT * FROM clients WHERE client_code = $1${forUpdate ? ' FOR UPDATE' : ''}`, [clientCode]))[0]
}

export async function upsertClient(
  tx: Tx,
  clientCode: string,
  body: { name?: string | undefined; collectionEnabled?: boolean | undefined },
  now: string,
): Promise<ClientRow> {
  const rows = await tx.query<ClientRow>(
    `INSERT INTO clients (client_code, name, collection_enabled, created_at, updated_at) VALUES ($1, $2, $3, $4, $4)
     ON CONFLICT (client_code) DO UPDATE SET name = COALESCE($2, clients.name),
       collection_enabled = COALESCE($5, clients.collection_enabled), updated_at = $4
     RETURNING *`,
    [clientCode, body.name ?? null, body.collectionEnabled ?? false, now, body.collectionEnabled ?? null],
  )
  return rows[0] as ClientRow
}

export interface IntegrationRow {
  integration_id: string
  name: string
  created_at: string
  updated_at: string
}

export async function findIntegration(db: Queryable, id: string): Promise<IntegrationRow | undefined> {
  return (await db.query<IntegrationRow>('SELECT * FROM integrations WHERE integration_id = $1', [id]))[0]
}

export async function upsertIntegration(tx: Tx, integrationId: string, name: string, now: string): Promise<IntegrationRow> {
  const rows = await tx.query<IntegrationRow>(
    `INSERT INTO integrations (integration_id, name, created_at, updated_at) VALUES ($1, $2, $3, $3)
     ON CONFLICT (integration_id) DO UPDATE SET name = $2, updated_at = $3 RETURNING *`,
    [integrationId, name, now],
  )
  return rows[0] as IntegrationRow
}

/*
 * Lists for the operator API: keyset pages in a stable order (`WHERE key > after ORDER BY key LIMIT n`), so
 * a page never repeats or skips a row that existed when the listing started, however many are added
 * meanwhile. The operator tables are small (clients and integrations by the hundred, keys and grants by the
 * handful per integration); each order is served by the primary key or a short sort.
 */

export async function listClients(db: Queryable, after: string | undefined, limit: number): Promise<ClientRow[]> {
  return db.query<ClientRow>('SELECT * FROM clients WHERE ($1::text IS NULL OR client_code > $1) ORDER BY client_code LIMIT $2', [
    after ?? null,
    limit,
  ])
}

export async function listIntegrations(db: Queryable, after: string | undefined, limit: number): Promise<IntegrationRow[]> {
  return db.query<IntegrationRow>(
    'SELECT * FROM integrations WHERE ($1::text IS NULL OR integration_id > $1) ORDER BY integration_id LIMIT $2',
    [after ?? null, limit],
  )
}

/**
 * What a sandbox client reset keeps (docs/operator-api.md): the client itself, its grants (and so the
 * Integrations' keys, which belong to no client), its webhook endpoints (configuration holding a signing
 * secret), its receipt route (configuration holding a signing secret, and the Source's proof: a verified route stays
 * verified; its receipts and their attempts are data and go), its payment provider (configuration holding Stripe's
 * keys), its feed head (sequence numbers keep rising, so a cursor from before the reset answers 410
 * `cursor_expired` instead of skipping events) and the audit trail. Every other table with a `client_code`
 * column is the client's data and is emptied of it, so a table added later is covered without a change here.
 */
export const RESET_KEEPS: ReadonlySet<string> = new Set([
  'clients',
  'grants',
  'webhook_endpoints',
  'receipt_routes',
  'client_payment_providers',
  'feed_heads',
  'audit_events',
])

/**
 * Deletes every row of the client in every table but RESET_KEEPS, children before parents (foreign keys),
 * and marks its whole feed purged. Returns the rows deleted per table (tables with none left out).
 */
export async function deleteClientData(tx: Tx, clientCode: string): Promise<Record<string, number>> {
  // First, under the feed head's row lock (held to commit): a write that allocates a sequence number waits for
  // the reset, and its event then follows the purge mark.
  await tx.query('UPDATE feed_heads SET purged_through_seq = last_seq WHERE client_code = $1', [clientCode])
  const tables =
    // Tables, not their partitions (DATABASE_LAYOUT=partitioned, src/store/layout.ts): a delete from a table reaches its partitions.
    (
      await tx.query<{ table_name: string }>(
        `SELECT c.relname AS table_name FROM pg_class c
        WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind IN ('r', 'p') AND NOT c.relispartition
          AND EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'client_code' AND NOT a.attisdropped)
        ORDER BY c.relname COLLATE "C"`,
      )
    )
      .map((r) => r.table_name)
      .filter((t) => !RESET_KEEPS.has(t))
  const edges = await tx.query<{ child: string; parent: string }>(
    `SELECT cl.relname AS child, pl.relname AS parent FROM pg_constraint k
       JOIN pg_class cl ON cl.oid = k.conrelid JOIN pg_class pl ON pl.oid = k.confrelid
      WHERE k.contype = 'f' AND k.conparentid = 0 AND k.connamespace = current_schema()::regnamespace AND k.conrelid <> k.confrelid`,
  )
  // Children first: a table is deleted from once no table still to do references it.
  const todo = new Set(tables)
  const order: string[] = []
  while (todo.size > 0) {
    const ready = [...todo].filter((t) => !edges.some((e) => e.parent === t && e.child !== t && todo.has(e.child)))
    if (ready.length === 0) throw new Error(`client reset: foreign keys form a cycle among ${[...todo].join(', ')}`)
    for (const t of ready) {
      order.push(t)
      todo.delete(t)
    }
  }
  const deleted: Record<string, number> = {}
  for (const table of order) {
    const rows = await tx.query<{ n: string }>(
      `WITH d AS (DELETE FROM ${quoteIdent(table)} WHERE client_code = $1 RETURNING 1) SELECT count(*) AS n FROM d`,
      [clientCode],
    )
    const n = Number(rows[0]?.n ?? 0)
    if (n > 0) deleted[table] = n
  }
  return deleted
}

function quoteIdent(name: string): string {
  return `"${name.replace(/"/g, '""')}"`
}
