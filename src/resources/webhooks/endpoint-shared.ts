import type { Grant } from '../../access/grants.ts'
import { Problem } from '../../domain/problems.ts'
import type { Queryable, Tx } from '../../store/store.ts'
import type { OperationResult } from '../operations.ts'
import { auditEndpoint, type EndpointRow, findEndpoint } from './store.ts'

/**
 * What the webhook endpoint's three services (endpoint-service.ts: configuration; delivery-log-service.ts: the
 * delivery log, retries and pings; replay-service.ts: replays) share: the endpoint as the API shows it, its reads that
 * answer 404 or 409, its audit event, and a write's rendered answer.
 */

export const notFound = () =>
  new Problem('webhook_endpoint_not_found', 'This Integration has no webhook endpoint for this client; configure one with PUT.')

/** A write's answer, rendered already (the operations here render inside their run). */
export const answer = (status: OperationResult['status'], body: unknown, afterCommit?: () => void): OperationResult => ({
  status,
  body: async () => body,
  ...(afterCommit ? { afterCommit } : {}),
})

export function endpointView(
  e: Pick<EndpointRow, 'url' | 'status' | 'disabled_reason' | 'secret_version'> & { lagging_since?: string | null },
) {
  return {
    url: e.url,
    status: e.status,
    disabledReason: e.disabled_reason,
    secretVersion: e.secret_version,
    lagging: (e.lagging_since ?? null) !== null,
    laggingSince: e.lagging_since ?? null,
  }
}

export async function existingEndpoint(db: Queryable, grant: Grant, forUpdate = false): Promise<EndpointRow> {
  const row = await findEndpoint(db, grant.clientCode, grant.integrationId, forUpdate)
  if (!row) throw notFound()
  return row
}

/** The endpoint, which must be enabled: a disabled one would send nothing (409 `webhook_endpoint_disabled`). */
export async function enabledEndpoint(db: Queryable, grant: Grant): Promise<EndpointRow> {
  const row = await existingEndpoint(db, grant)
  if (row.status !== 'enabled') {
    throw new Problem(
      'webhook_endpoint_disabled',
      'The webhook endpoint is disabled, so nothing would be sent; configure it again with PUT first.',
      { extensions: { disabledReason: row.disabled_reason } },
    )
  }
  return row
}

/** The Integration's change to its endpoint, audited: identifiers and state, never the URL or a secret in clear. */
export function auditChange(
  tx: Tx,
  grant: Grant,
  action: string,
  after: Pick<EndpointRow, 'url' | 'status' | 'secret_version'>,
  now: string,
) {
  return auditEndpoint(tx, {
    clientCode: grant.clientCode,
    integrationId: grant.integrationId,
    actor: `integration:${grant.integrationId}`,
    action,
    details: { integrationId: grant.integrationId, status: after.status, secretVersion: after.secret_version },
    change: { url: after.url, status: after.status, secretVersion: after.secret_version },
    now,
  })
}
