import type { Queryable, Tx } from '../../store/store.ts'

/**
 * SQL of a provider's side of paying (migration 0024): the checkout attempts of a Payment request, the provider
 * events handled, and the disputes reversed. The rules are in payments/checkout.ts (paying) and
 * payments/provider-events.ts (the provider's events).
 */
export type CheckoutStatus = 'creating' | 'open' | 'processing' | 'complete' | 'expired' | 'failed' | 'refunded'

export interface CheckoutRow {
  external_payment_request_id: string
  attempt: number
  provider: string
  status: CheckoutStatus
  session_id: string | null
  url: string | null
  expires_at: string
  created_at: string
}

const COLUMNS = 'external_payment_request_id, attempt, provider, status, session_id, url, expires_at, created_at'

/** The request's latest attempt, row-locked (the caller holds the request's lock: attempts of one request are serial). */
export async function lockLatestCheckout(tx: Tx, clientCode: string, requestId: string): Promise<CheckoutRow | undefined> {
  return (
    await tx.query<CheckoutRow>(
      `SELECT ${COLUMNS} FROM provider_checkouts WHERE client_code = $1 AND external_payment_request_id = $2
        ORDER BY attempt DESC LIMIT 1 FOR UPDATE`,
      [clientCode, requestId],
    )
  )[0]
}

export async function insertCheckout(
  tx: Tx,
  clientCode: string,
  c: { requestId: string; attempt: number; provider: string; expiresAt: string; now: string },
): Promise<CheckoutRow> {
  const rows = await tx.query<CheckoutRow>(
    `INSERT INTO provider_checkouts (client_code, external_payment_request_id, attempt, provider, status, expires_at, created_at, updated_at)
     VALUES ($1, $2, $3, $4, 'creating', $5, $6, $6)
     RETURNING ${COLUMNS}`,
    [clientCode, c.requestId, c.attempt, c.provider, c.expiresAt, c.now],
  )
  return rows[0] as CheckoutRow
}

/**
 * The provider answered an attempt with its session: `open` from `creating` (a second answer for the same attempt,
 * the same session by its idempotency key, changes nothing). Returns whether the row moved.
 */
export async function openCheckout(
  db: Queryable,
  clientCode: string,
  c: { requestId: string; attempt: number; sessionId: string; url: string; expiresAt: string; now: string },
): Promise<void> {
  await db.query(
    `UPDATE provider_checkouts SET status = 'open', session_id = $4, url = $5, expires_at = $6, updated_at = $7
      WHERE client_code = $1 AND external_payment_request_id = $2 AND attempt = $3 AND status = 'creating'`,
    [clientCode, c.requestId, c.attempt, c.sessionId, c.url, c.expiresAt, c.now],
  )
}

/** The attempt of a provider session, row-locked; undefined for a session the service did not make. */
export async function lockCheckoutBySession(
  tx: Tx,
  clientCode: string,
  provider: string,
  sessionId: string,
): Promise<CheckoutRow | undefined> {
  return (
    await tx.query<CheckoutRow>(
      `SELECT ${COLUMNS} FROM provider_checkouts WHERE client_code = $1 AND provider = $2 AND session_id = $3 FOR UPDATE`,
      [clientCode, provider, sessionId],
    )
  )[0]
}

export async function setCheckoutStatus(
  tx: Tx,
  clientCode: string,
  c: { requestId: string; attempt: number; status: CheckoutStatus; now: string },
): Promise<void> {
  await tx.query(
    `UPDATE provider_checkouts SET status = $4, updated_at = $5
      WHERE client_code = $1 AND external_payment_request_id = $2 AND attempt = $3`,
    [clientCode, c.requestId, c.attempt, c.status, c.now],
  )
}

/** Whether this event was already handled (a cheap read before asking the provider anything). */
export async function providerEventHandled(db: Queryable, clientCode: string, provider: string, eventId: string): Promise<boolean> {
  const rows = await db.query<{ found: boolean }>(
    `SELECT EXISTS (SELECT 1 FROM provider_events WHERE client_code = $1 AND provider = $2 AND event_id = $3) AS found`,
    [clientCode, provider, eventId],
  )
  return rows[0]?.found === true
}

/**
 * Records an event as handled, in the transaction of its effect. False when it already was: a concurrent handler of
 * the same event waits here for the first one's commit, then finds its row (ON CONFLICT DO NOTHING).
 */
export async function recordProviderEvent(
  tx: Tx,
  clientCode: string,
  e: { provider: string; eventId: string; type: string; effect: string; now: string },
): Promise<boolean> {
  const rows = await tx.query(
    `INSERT INTO provider_events (client_code, provider, event_id, event_type, effect, received_at)
     VALUES ($1, $2, $3, $4, $5, $6)
     ON CONFLICT DO NOTHING RETURNING event_id`,
    [clientCode, e.provider, e.eventId, e.type, e.effect, e.now],
  )
  return rows.length > 0
}

/** A provider reversal (a dispute) recorded once: false when it already was. */
export async function recordProviderReversal(
  tx: Tx,
  clientCode: string,
  r: { provider: string; reversalId: string; requestId: string; amountMinor: bigint; now: string },
): Promise<boolean> {
  const rows = await tx.query(
    `INSERT INTO provider_reversals (client_code, provider, provider_reversal_id, external_payment_request_id, amount_minor, recorded_at)
     VALUES ($1, $2, $3, $4, $5, $6)
     ON CONFLICT DO NOTHING RETURNING provider_reversal_id`,
    [clientCode, r.provider, r.reversalId, r.requestId, r.amountMinor.toString(), r.now],
  )
  return rows.length > 0
}

/** The request a provider's payment id belongs to (a dispute names the payment, not the request). */
export async function findRequestOfProviderPayment(
  db: Queryable,
  clientCode: string,
  provider: string,
  providerPaymentId: string,
): Promise<string | undefined> {
  const rows = await db.query<{ id: string }>(
    `SELECT external_payment_request_id AS id FROM payments WHERE client_code = $1 AND provider = $2 AND provider_payment_id = $3`,
    [clientCode, provider, providerPaymentId],
  )
  return rows[0]?.id
}

/**
 * The page's read-back of an attempt (docs/decisions.md, "Money the provider moved"): claims the
 * right to ask the provider about it, at most once per `everyMs` per attempt across every instance (one UPDATE, no
 * transaction held while the provider answers). The session id when claimed, else undefined.
 */
export async function claimReadBack(
  db: Queryable,
  clientCode: string,
  c: { requestId: string; now: string; notBefore: string },
): Promise<{ session_id: string; provider: string } | undefined> {
  return (
    await db.query<{ session_id: string; provider: string }>(
      `UPDATE provider_checkouts k SET read_back_at = $3
        WHERE k.client_code = $1 AND k.external_payment_request_id = $2 AND k.status IN ('open', 'processing')
          AND k.session_id IS NOT NULL AND (k.read_back_at IS NULL OR k.read_back_at <= $4)
          AND k.attempt = (SELECT max(l.attempt) FROM provider_checkouts l WHERE l.client_code = $1 AND l.external_payment_request_id = $2)
        RETURNING k.session_id, k.provider`,
      [clientCode, c.requestId, c.now, c.notBefore],
    )
  )[0]
}

/**
 * The attempts of one client the sweep looks at: open sessions of a request that can no longer take money (canceled,
 * expired, decided), to end at the provider; and open or processing ones past their session's expiry, to read back.
 */
export async function checkoutsToSettle(
  db: Queryable,
  clientCode: string,
  c: { now: string; limit: number },
): Promise<{ external_payment_request_id: string; session_id: string; provider: string; close: boolean }[]> {
  return db.query(
    `SELECT k.external_payment_request_id, k.session_id, k.provider, (p.status <> 'open') AS close
       FROM provider_checkouts k
       JOIN payment_requests p ON p.client_code = $1 AND p.external_payment_request_id = k.external_payment_request_id
      WHERE k.client_code = $1 AND k.session_id IS NOT NULL
        AND ((k.status = 'open' AND p.status <> 'open') OR (k.status IN ('open', 'processing') AND k.expires_at <= $2))
      ORDER BY k.expires_at LIMIT $3`,
    [clientCode, c.now, c.limit],
  )
}

/** The sweep ended a session at the provider: the attempt is over (a payment that slipped through is returned). */
export async function markCheckoutClosed(db: Queryable, clientCode: string, c: { requestId: string; sessionId: string; now: string }) {
  await db.query(
    `UPDATE provider_checkouts SET status = 'expired', updated_at = $4
      WHERE client_code = $1 AND external_payment_request_id = $2 AND session_id = $3 AND status = 'open'`,
    [clientCode, c.requestId, c.sessionId, c.now],
  )
}
