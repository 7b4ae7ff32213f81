import { claimKey, type LeaseHolder, leaseHolderGone } from '../../store/lease-holder.ts'
import type { Queryable } from '../../store/store.ts'

/**
 * SQL of the catch-up sweep's cursor (migration 0029, provider_sync_cursors): one row per client and provider, with
 * the last event handled and the sweep's lease. Every statement names the client (client_code = $1).
 */
export interface SyncCursorRow {
  last_event_id: string | null
  last_event_created: string | null
}

/**
 * Claims the client's sweep as a lease (one statement: the row made on first use, taken when free, its lease expired,
 * or its holder's lock gone). Undefined when another sweep holds it.
 */
export async function claimSync(
  db: Queryable,
  clientCode: string,
  c: { provider: string; token: string; now: string; leaseUntil: string; holder?: LeaseHolder | undefined },
): Promise<SyncCursorRow | undefined> {
  const holder = claimKey(c.holder)
  if (holder === 'not_held') return undefined
  return (
    await db.query<SyncCursorRow>(
      `INSERT INTO provider_sync_cursors AS s (client_code, provider, lease_token, lease_expires_at, lease_holder)
       VALUES ($1, $2, $3, $4, $6)
       ON CONFLICT (client_code, provider) DO UPDATE SET lease_token = $3, lease_expires_at = $4, lease_holder = $6
        WHERE s.client_code = $1 AND (s.lease_token IS NULL OR s.lease_expires_at <= $5 OR ${leaseHolderGone('s.lease_holder')})
       RETURNING s.last_event_id, s.last_event_created::text AS last_event_created`,
      [clientCode, c.provider, c.token, c.leaseUntil, c.now, holder],
    )
  )[0]
}

/** Stores where the sweep got to (after a page of events was handled), while the lease is still this sweep's. */
export async function advanceSync(
  db: Queryable,
  clientCode: string,
  c: { provider: string; token: string; eventId: string; created: number; leaseUntil: string },
): Promise<boolean> {
  const rows = await db.query(
    `UPDATE provider_sync_cursors SET last_event_id = $4, last_event_created = $5, lease_expires_at = $6
      WHERE client_code = $1 AND provider = $2 AND lease_token = $3 RETURNING client_code`,
    [clientCode, c.provider, c.token, c.eventId, c.created, c.leaseUntil],
  )
  return rows.length > 0
}

/** The sweep ended: its lease is released. */
export async function releaseSync(db: Queryable, clientCode: string, c: { provider: string; token: string; now: string }) {
  await db.query(
    `UPDATE provider_sync_cursors SET lease_token = NULL, lease_expires_at = NULL, lease_holder = NULL, last_run_at = $4
      WHERE client_code = $1 AND provider = $2 AND lease_token = $3`,
    [clientCode, c.provider, c.token, c.now],
  )
}

/** The clients with a provider configured (retired ones too: their events still apply), for the periodic sweep. */
export async function clientsWithProvider(db: Queryable): Promise<string[]> {
  const rows = await db.query<{ client_code: string }>('SELECT client_code FROM client_payment_providers ORDER BY client_code')
  return rows.map((r) => r.client_code)
}
