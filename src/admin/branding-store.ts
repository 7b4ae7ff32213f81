import type { Branding } from '../domain/branding.ts'
import type { Queryable, Tx } from '../store/store.ts'

/** A client's branding (clients.branding, migration 0028): the JSON object as the operator last put it. */
export interface ClientBrandingRow {
  client_code: string
  branding: Record<string, unknown> | null
  updated_at: string
}

export async function findClientBranding(db: Queryable, clientCode: string): Promise<ClientBrandingRow | undefined> {
  return (
    await db.query<ClientBrandingRow>('SELECT client_code, branding, updated_at FROM clients WHERE client_code = $1', [clientCode])
  )[0]
}

/** Replaces the branding of an existing client; undefined when there is no such client. */
export async function replaceClientBranding(
  tx: Tx,
  clientCode: string,
  branding: Branding,
  now: string,
): Promise<ClientBrandingRow | undefined> {
  return (
    await tx.query<ClientBrandingRow>(
      `UPDATE clients SET branding = $2::jsonb, updated_at = $3 WHERE client_code = $1
       RETURNING client_code, branding, updated_at`,
      [clientCode, JSON.stringify(branding), now],
    )
  )[0]
}
