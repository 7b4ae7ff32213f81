import type { EncryptedColumns } from '../../store/secret-keys.ts'
import type { Queryable } from '../../store/store.ts'

/**
 * The stored payment-provider configuration of a client (`client_payment_providers`, migration 0021), as the
 * payment path reads it (src/resources/payments/registry.ts). The operator's writes are in
 * src/admin/payment-provider-store.ts; the ciphertexts are made with `providerSecretAad` by both.
 */

/** The columns that hold a secret, each bound to the client and to itself (a ciphertext moved to the other column does not open). */
export type ProviderSecretColumn = 'secret_key_ciphertext' | 'webhook_secret_ciphertext'

/** The key ring's additional data for one of a client's provider secrets. */
export const providerSecretAad = (clientCode: string, column: ProviderSecretColumn) => `client_payment_providers/${clientCode}/${column}`

/**
 * Both secrets of every client's provider, for the rewrap (src/store/secret-keys.ts): one entry per column, because
 * each column's ciphertexts are bound to their own additional data. Listed in src/app.ts `encryptedSecrets`.
 */
export const paymentProviderSecretColumns: readonly EncryptedColumns[] = (
  ['secret_key_ciphertext', 'webhook_secret_ciphertext'] as const
).map((column) => ({
  table: 'client_payment_providers',
  keyColumns: ['client_code'],
  ciphertextColumns: [column],
  aad: (row: Record<string, string>) => providerSecretAad(row.client_code as string, column),
}))

export interface ProviderSecretsRow {
  /** The provider's name (its folder under payments/: today only Stripe's). */
  provider: string
  mode: 'test' | 'live'
  secret_key_ciphertext: string
  webhook_secret_ciphertext: string
  updated_at: string
  /** Set by a forced removal while attempts were open (migration 0029): events only, no new payments. */
  retired_at: string | null
}

/** The client's provider with its encrypted secrets, or undefined when none is configured. One primary-key read. */
export async function findProviderSecrets(db: Queryable, clientCode: string): Promise<ProviderSecretsRow | undefined> {
  const rows = await db.query<ProviderSecretsRow>(
    `SELECT provider, mode, secret_key_ciphertext, webhook_secret_ciphertext, updated_at, retired_at
       FROM client_payment_providers WHERE client_code = $1`,
    [clientCode],
  )
  return rows[0]
}

/** Whether the client has a provider for new payments (not retired): production refuses payment requests without. */
export async function hasActiveProvider(db: Queryable, clientCode: string): Promise<boolean> {
  const rows = await db.query<{ found: boolean }>(
    `SELECT EXISTS (SELECT 1 FROM client_payment_providers WHERE client_code = $1 AND retired_at IS NULL) AS found`,
    [clientCode],
  )
  return rows[0]?.found === true
}

export const providerConfigStore = { findProviderSecrets, hasActiveProvider }
export type ProviderConfigStore = typeof providerConfigStore
