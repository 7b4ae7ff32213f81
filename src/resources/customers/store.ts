import type { Queryable, Tx } from '../../store/store.ts'
import type { ContactT, CustomerWrite } from './schema.ts'

export interface CustomerRow {
  external_customer_id: string
  revision: string
  representation: CustomerWrite & { contacts: ContactT[] }
  deactivated_contacts: ContactT[]
  updated_at: string
}

const COLUMNS = 'external_customer_id, revision, representation, deactivated_contacts, updated_at'

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
export const customerStore = { findCustomer, insertCustomerIfNew, updateCustomer, listCustomers, existingCustomerIds }
export type CustomerStore = typeof customerStore
