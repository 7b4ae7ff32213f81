import type { Queryable, Tx } from '../../store/store.ts'
import { onRealTime } from '../sandbox-clock/store.ts'
import type { PaymentRequestWrite } from './schema.ts'

export type PaymentRequestStatus = 'open' | 'confirmed' | 'failed' | 'expired'

export interface PaymentRequestRow {
  client_code: string
  external_payment_request_id: string
  external_receivable_id: string
  revision: string
  status: PaymentRequestStatus
  currency: string
  amount_minor: string
  description: string | null
  expires_at: string
  body: PaymentRequestWrite
  page_token: string
  created_at: string
  updated_at: string
}

const COLUMNS = `client_code, external_payment_request_id, external_receivable_id, revision, status, currency, amount_minor,
  description, expires_at, body, page_token, created_at, updated_at`

export async function findPaymentRequest(db: Queryable, clientCode: string, id: string): Promise<PaymentRequestRow | undefined> {
  return (
    await db.query<PaymentRequestRow>(
      `SELECT ${COLUMNS} FROM payment_requests WHERE client_code = $1 AND external_payment_request_id = $2`,
      [clientCode, id],
    )
  )[0]
}

/** The request, row-locked to the end of the transaction: every state change of a request starts here. */
export async function lockPaymentRequest(tx: Tx, clientCode: string, id: string): Promise<PaymentRequestRow | undefined> {
  return (
    await tx.query<PaymentRequestRow>(
      `SELECT ${COLUMNS} FROM payment_requests WHERE client_code = $1 AND external_payment_request_id = $2 FOR UPDATE`,
      [clientCode, id],
    )
  )[0]
}

/**
 * The one lookup not keyed by client code: the hosted page knows only its token (256 random bits, unique).
 * It answers the client code, and everything after it is keyed by client code again.
 */
export async function findPaymentRequestByToken(db: Queryable, token: string): Promise<{ client_code: string; id: string } | undefined> {
  const rows = await db.query<{ client_code: string; external_payment_request_id: string }>(
    'SELECT client_code, external_payment_request_id FROM payment_requests WHERE page_token = $1',
    [token],
  )
  const row = rows[0]
  return row ? { client_code: row.client_code, id: row.external_payment_request_id } : undefined
}

export async function insertPaymentRequest(
  tx: Tx,
  clientCode: string,
  id: string,
  r: {
    receivableId: string
    currency: string
    amountMinor: bigint
    description: string | null
    expiresAt: string
    body: PaymentRequestWrite
    token: string
    now: string
  },
): Promise<PaymentRequestRow> {
  const rows = await tx.query<PaymentRequestRow>(
    `INSERT INTO payment_requests (client_code, external_payment_request_id, external_receivable_id, revision, status, currency,
                                   amount_minor, description, expires_at, body, page_token, created_at, updated_at)
     VALUES ($1, $2, $3, 1, 'open', $4, $5, $6, $7, $8, $9, $10, $10)
     RETURNING ${COLUMNS}`,
    [
      clientCode,
      id,
      r.receivableId,
      r.currency,
      r.amountMinor.toString(),
      r.description,
      r.expiresAt,
      JSON.stringify(r.body),
      r.token,
      r.now,
    ],
  )
  return rows[0] as PaymentRequestRow
}

/** A state change of a locked request: the new status, revision + 1. Returns the row as it now is. */
export async function setPaymentRequestStatus(
  tx: Tx,
  clientCode: string,
  id: string,
  status: PaymentRequestStatus,
  now: string,
): Promise<PaymentRequestRow> {
  const rows = await tx.query<PaymentRequestRow>(
    `UPDATE payment_requests SET status = $3, revision = revision + 1, updated_at = $4
      WHERE client_code = $1 AND external_payment_request_id = $2
      RETURNING ${COLUMNS}`,
    [clientCode, id, status, now],
  )
  return rows[0] as PaymentRequestRow
}

/**
 * The expiry sweeper's claim: up to `limit` open requests past their expiry, of any client, row-locked.
 * SKIP LOCKED leaves rows another sweeper (or a confirmation) holds to it, so instances never wait on
 * each other and never expire a request twice. The partial index payment_requests_open_expiry serves it.
 */
export async function expireDue(
  tx: Tx,
  now: string,
  limit: number,
  /**
   * Sandbox clocks (src/resources/sandbox-clock): `clientCode` expires only that client's requests (at its time,
   * `now`); `realTimeOnly` leaves out the clients whose clock is stopped (their own pass expires them).
   */
  only: { clientCode?: string; realTimeOnly?: boolean } = {},
): Promise<{ client_code: string; id: string; revision: number }[]> {
  const filter = only.clientCode !== undefined ? 'AND r.client_code = $3' : only.realTimeOnly ? `AND ${onRealTime('r')}` : ''
  const rows = await tx.query<{ client_code: string; external_payment_request_id: string; revision: string }>(
    `UPDATE payment_requests p SET status = 'expired', revision = p.revision + 1, updated_at = $1
       FROM (SELECT client_code, external_payment_request_id FROM payment_requests r
              WHERE status = 'open' AND expires_at <= $1 ${filter}
              ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED) due
      WHERE p.client_code = due.client_code AND p.external_payment_request_id = due.external_payment_request_id
      RETURNING p.client_code, p.external_payment_request_id, p.revision`,
    only.clientCode !== undefined ? [now, limit, only.clientCode] : [now, limit],
  )
  return rows.map((r) => ({ client_code: r.client_code, id: r.external_payment_request_id, revision: Number(r.revision) }))
}

/** The creditor's name for the hosted page: the client's name, or its code when it has none. */
export async function creditorName(db: Queryable, clientCode: string): Promise<string> {
  const rows = await db.query<{ name: string | null }>('SELECT name FROM clients WHERE client_code = $1', [clientCode])
  return rows[0]?.name ?? clientCode
}
