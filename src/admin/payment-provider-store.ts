import type { Queryable, Tx } from '../store/store.ts'

/**
 * The operator's writes and reads of a client's payment provider (`client_payment_providers`, migration 0021).
 * Secrets arrive here already encrypted (src/admin/payment-provider-service.ts); what the payment path reads is in
 * src/resources/payments/provider-config-store.ts.
 */
export interface PaymentProviderRow {
  client_code: string
  provider: 'stripe'
  mode: 'test' | 'live'
  secret_key_hint: string
  created_at: string
  updated_at: string
  /** A forced removal while attempts were open: events only (migration 0029). */
  retired_at: string | null
}

/** Everything but the ciphertexts: nothing read here can carry a secret into a response. */
const VIEW_COLUMNS = 'client_code, provider, mode, secret_key_hint, created_at, updated_at, retired_at'

export async function findPaymentProvider(db: Queryable, clientCode: string): Promise<PaymentProviderRow | undefined> {
  const rows = await db.query<PaymentProviderRow>(`SELECT ${VIEW_COLUMNS} FROM client_payment_providers WHERE client_code = $1`, [
    clientCode,
  ])
  return rows[0]
}

export interface PaymentProviderWrite {
  clientCode: string
  provider: 'stripe'
  mode: 'test' | 'live'
  secretKeyCiphertext: string
  webhookSecretCiphertext: string
  secretKeyHint: string
  now: string
}

/** Creates or replaces the client's provider (both secrets together); `created_at` stays that of the first PUT. */
export async function upsertPaymentProvider(tx: Tx, w: PaymentProviderWrite): Promise<PaymentProviderRow> {
  const rows = await tx.query<PaymentProviderRow>(
    `INSERT INTO client_payment_providers
       (client_code, provider, mode, secret_key_ciphertext, webhook_secret_ciphertext, secret_key_hint, created_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $7)
     ON CONFLICT (client_code) DO UPDATE SET provider = $2, mode = $3, secret_key_ciphertext = $4,
       webhook_secret_ciphertext = $5, secret_key_hint = $6, updated_at = $7, retired_at = NULL
     RETURNING ${VIEW_COLUMNS}`,
    [w.clientCode, w.provider, w.mode, w.secretKeyCiphertext, w.webhookSecretCiphertext, w.secretKeyHint, w.now],
  )
  return rows[0] as PaymentProviderRow
}

/** Removes the client's provider; the row as it was, or undefined when there was none. */
export async function deletePaymentProvider(tx: Tx, clientCode: string): Promise<PaymentProviderRow | undefined> {
  const rows = await tx.query<PaymentProviderRow>(`DELETE FROM client_payment_providers WHERE client_code = $1 RETURNING ${VIEW_COLUMNS}`, [
    clientCode,
  ])
  return rows[0]
}

/** The client's checkout attempts still open or processing at its provider: money may still move through it. */
export async function countLiveCheckouts(tx: Tx, clientCode: string): Promise<number> {
  const rows = await tx.query<{ n: string }>(
    `SELECT count(*)::text AS n FROM provider_checkouts WHERE client_code = $1 AND status IN ('creating', 'open', 'processing')`,
    [clientCode],
  )
  return Number(rows[0]?.n ?? 0)
}

/** `?force=true` with attempts live: no new payment goes through it; its events still apply (registry.ts). */
export async function retirePaymentProvider(tx: Tx, clientCode: string, now: string): Promise<PaymentProviderRow | undefined> {
  const rows = await tx.query<PaymentProviderRow>(
    `UPDATE client_payment_providers SET retired_at = COALESCE(retired_at, $2) WHERE client_code = $1 RETURNING ${VIEW_COLUMNS}`,
    [clientCode, now],
  )
  return rows[0]
}
