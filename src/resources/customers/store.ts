import type { Queryable, QueryOptions, Tx } from '../../store/store.ts'
import type { ContactT, CustomerWrite } from './schema.ts'

/**
 * The write path's statements whose text never varies are prepared by name on each PostgreSQL connection
 * (`QueryOptions.prepared`): planned once per connection instead of at every run (docs/performance.md).
 */
const PREPARED: QueryOptions = { prepared: true }

export interface CustomerRow {
  external_customer_id: string
  revision: string
  representation: CustomerWrite & { contacts: ContactT[] }
  deactivated_contacts: ContactT[]
  updated_at: string
  /** Set once the Customer's personal data is erased (migration 0039): the row is then a tombstone. */
  erased_at: string | null
}

const COLUMNS = 'external_customer_id, revision, representation, deactivated_contacts, updated_at, erased_at'

export async function findCustomer(db: Queryable, clientCode: string, id: string): Promise<CustomerRow | undefined> {
  const rows = await db.query<CustomerRow>(`SELECT ${COLUMNS} FROM customers WHERE client_code = $1 AND external_customer_id = $2`, [
    clientCode,
    id,
  ])
  return rows[0]
}

/**
 * Creates the Customer unless it exists, in one statement that also reads the existing one: a create, a
 * replace and a retry each need one round trip here.
 */
export async function insertCustomerIfNew(
  tx: Tx,
  clientCode: string,
  id: string,
  representation: CustomerRow['representation'],
  now: string,
): Promise<{ created: CustomerRow } | { existing: CustomerRow }> {
  const rows = await tx.query<CustomerRow & { created: boolean }>(
    `WITH ins AS (
       INSERT INTO customers (client_code, external_customer_id, revision, representation, created_at, updated_at)
       VALUES ($1, $2, 1, $3, $4, $4) ON CONFLICT (client_code, external_customer_id) DO NOTHING RETURNING ${COLUMNS})
     SELECT true AS created, ${COLUMNS} FROM ins
     UNION ALL
     SELECT false AS created, ${COLUMNS} FROM customers WHERE client_code = $1 AND external_customer_id = $2`,
    [clientCode, id, JSON.stringify(representation), now],
  )
  const { created, ...row } = rows[0] as CustomerRow & { created: boolean }
  return created ? { created: row } : { existing: row }
}

/**
 * `insertCustomerIfNew` for many Customers in one statement (distinct identities): each new one is created, and
 * every one comes back, created or as it existed, by identity. Those that existed are read one key probe per
 * identifier (the `LATERAL … LIMIT 1`), whatever the table held when the connection's plan was made
 * (docs/decisions.md, "Reads by many identifiers probe the key per identifier").
 */
export async function insertCustomersIfNew(
  tx: Tx,
  clientCode: string,
  items: readonly { id: string; representation: CustomerRow['representation'] }[],
  now: string,
): Promise<Map<string, { created: CustomerRow } | { existing: CustomerRow }>> {
  const rows = await tx.query<CustomerRow & { created: boolean }>(
    `WITH ins AS (
       INSERT INTO customers (client_code, external_customer_id, revision, representation, created_at, updated_at)
       SELECT $1, t.id, 1, t.representation::jsonb, $4, $4 FROM unnest($2::text[], $3::text[]) AS t(id, representation)
       ON CONFLICT (client_code, external_customer_id) DO NOTHING RETURNING ${COLUMNS})
     SELECT true AS created, ${COLUMNS} FROM ins
     UNION ALL
     SELECT false AS created, c.* FROM unnest($2::text[]) AS k(id) CROSS JOIN LATERAL (
       SELECT ${COLUMNS} FROM customers WHERE client_code = $1 AND external_customer_id = k.id LIMIT 1) c`,
    [clientCode, items.map((it) => it.id), items.map((it) => JSON.stringify(it.representation)), now],
    PREPARED,
  )
  return new Map(rows.map(({ created, ...row }) => [row.external_customer_id, created ? { created: row } : { existing: row }]))
}

/** `updateCustomer` for many Customers in one statement (distinct identities); the new rows, by identity. */
export async function updateCustomers(
  tx: Tx,
  clientCode: string,
  items: readonly { id: string; representation: CustomerRow['representation']; deactivated: ContactT[] }[],
  now: string,
): Promise<Map<string, CustomerRow>> {
  if (items.length === 0) return new Map()
  const rows = await tx.query<CustomerRow>(
    `UPDATE customers c SET representation = t.representation::jsonb, deactivated_contacts = t.deactivated::jsonb,
            revision = c.revision + 1, updated_at = $5
       FROM unnest($2::text[], $3::text[], $4::text[]) AS t(id, representation, deactivated)
      WHERE c.client_code = $1 AND c.external_customer_id = t.id
     RETURNING ${COLUMNS.split(', ')
       .map((col) => `c.${col}`)
       .join(', ')}`,
    [
      clientCode,
      items.map((it) => it.id),
      items.map((it) => JSON.stringify(it.representation)),
      items.map((it) => JSON.stringify(it.deactivated)),
      now,
    ],
    PREPARED,
  )
  return new Map(rows.map((r) => [r.external_customer_id, r]))
}

export async function updateCustomer(
  tx: Tx,
  clientCode: string,
  id: string,
  representation: CustomerRow['representation'],
  deactivated: ContactT[],
  now: string,
): Promise<CustomerRow> {
  const rows = await tx.query<CustomerRow>(
    `UPDATE customers SET representation = $3, deactivated_contacts = $4, revision = revision + 1, updated_at = $5
      WHERE client_code = $1 AND external_customer_id = $2 RETURNING ${COLUMNS}`,
    [clientCode, id, JSON.stringify(representation), JSON.stringify(deactivated), now],
  )
  return rows[0] as CustomerRow
}

export async function listCustomers(db: Queryable, clientCode: string, after: string | undefined, limit: number): Promise<CustomerRow[]> {
  return db.query<CustomerRow>(
    `SELECT ${COLUMNS} FROM customers
      WHERE client_code = $1 AND ($2::text IS NULL OR external_customer_id > $2)
      ORDER BY external_customer_id LIMIT $3`,
    [clientCode, after ?? null, limit],
  )
}

/** Which of `ids` are Customers of the client (for references from Receivables and payments). */
export async function existingCustomerIds(db: Queryable, clientCode: string, ids: readonly string[]): Promise<Set<string>> {
  const rows = await db.query<{ external_customer_id: string }>(
    'SELECT external_customer_id FROM customers WHERE client_code = $1 AND external_customer_id = ANY($2::text[])',
    [clientCode, ids],
  )
  return new Set(rows.map((r) => r.external_customer_id))
}

/** The family's store functions, for the factories that receive them as a `Pick<>`. */
export const customerStore = {
  findCustomer,
  insertCustomerIfNew,
  insertCustomersIfNew,
  updateCustomer,
  updateCustomers,
  listCustomers,
  existingCustomerIds,
}
export type CustomerStore = typeof customerStore
