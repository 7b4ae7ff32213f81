import type { Grant } from '../../access/grants.ts'
import type { KeyRing } from '../../domain/key-ring.ts'
import { type Clock, isoNow } from '../../domain/time.ts'
import { checkConfiguredDestination, type Resolver } from '../../outbound/destination.ts'
import { lockIdentity } from '../../store/locks.ts'
import type { Store, Tx } from '../../store/store.ts'
import { defineOperation, grantOf } from '../operations.ts'
import { answer, auditChange, endpointView, existingEndpoint } from './endpoint-shared.ts'
import { NoBody, WebhookEndpoint, WebhookEndpointPut, WebhookEndpointReconfigured, WebhookEndpointWithSecret } from './schema.ts'
import { newSigningSecret, openSecret, ROTATION_OVERLAP_MS, secretAad } from './secrets.ts'
import {
  auditEndpoint,
  disableEndpoint,
  type EndpointRow,
  feedHead,
  findEndpoint,
  insertEndpoint,
  reconfigureEndpoint,
  rotateEndpointSecret,
} from './store.ts'

/** Every write of an endpoint is its Integration's, under this scope. */
export const MANAGE = ['webhooks:manage'] as const

/**
 * The endpoint's configuration, for its Integration: PUT, rotate-secret, disable and GET; and the admin service's
 * hook when a grant is revoked.
 */
export function createEndpointService({
  store,
  clock,
  resolver,
  allowLoopback,
  keyRing,
}: {
  store: Store
  clock: Clock
  resolver: Resolver
  allowLoopback: boolean
  keyRing: () => Promise<KeyRing>
}) {
  /**
   * Writes a new signing secret (returned, to be shown once). The old one, when it still opens, keeps signing for
   * ROTATION_OVERLAP_MS (re-encrypted under the current key); one that no key opens is simply replaced.
   */
  async function replaceSecret(tx: Tx, ring: KeyRing, grant: Grant, now: string, old: string | null = null): Promise<string> {
    const aad = secretAad(grant.clientCode, grant.integrationId)
    const signingSecret = newSigningSecret()
    await rotateEndpointSecret(tx, {
      clientCode: grant.clientCode,
      integrationId: grant.integrationId,
      secretCiphertext: ring.encrypt(aad, signingSecret),
      previousCiphertext: old === null ? null : ring.encrypt(aad, old),
      previousExpiresAt: old === null ? null : new Date(clock.now().getTime() + ROTATION_OVERLAP_MS).toISOString(),
      now,
    })
    return signingSecret
  }

  /**
   * PUT: 201 with the signing secret on the first configuration; 200 after (re-enabling a disabled endpoint). The
   * URL is checked (its name resolved) and the key ring loaded before the transaction: a slow DNS answer never
   * holds a database connection.
   */
  const putOperation = defineOperation({
    kind: 'webhook_endpoint',
    scopes: MANAGE,
    body: WebhookEndpointPut,
    response: WebhookEndpointReconfigured,
    responses: { 201: WebhookEndpointWithSecret, 200: WebhookEndpointReconfigured },
    source: false,
    async before(_ctx, body) {
      await checkConfiguredDestination(body.url, { allowLoopback, resolver })
      await keyRing()
    },
    async run({ tx }, ctx, { url }) {
      const grant = grantOf(ctx)
      // Loaded by `before`: the loader's promise, settled, runs no statement here.
      const ring = await keyRing()
      const now = isoNow(clock)
      await lockIdentity(tx, grant.clientCode, 'webhook-endpoint', grant.integrationId)
      const row = await findEndpoint(tx, grant.clientCode, grant.integrationId, true)
      const head = await feedHead(tx, grant.clientCode)
      if (!row) {
        const signingSecret = newSigningSecret()
        await insertEndpoint(tx, {
          clientCode: grant.clientCode,
          integrationId: grant.integrationId,
          url,
          secretCiphertext: ring.encrypt(secretAad(grant.clientCode, grant.integrationId), signingSecret),
          seq: head,
          now,
        })
        const created = { url, status: 'enabled' as const, disabled_reason: null, secret_version: 1 }
        await auditChange(tx, grant, 'webhook_endpoint.created', created, now)
        return answer(201, { ...endpointView(created), signingSecret })
      }
      const reenable = row.status === 'disabled'
      await reconfigureEndpoint(tx, {
        clientCode: grant.clientCode,
        integrationId: grant.integrationId,
        url,
        reenableAtSeq: reenable ? head : null,
        now,
      })
      // A secret no key opens can never sign again: this PUT issues a new one (shown once), as rotate-secret would.
      const replaced = openSecret(ring, row) === null ? await replaceSecret(tx, ring, grant, now) : null
      const after = {
        url,
        status: 'enabled' as const,
        disabled_reason: null,
        secret_version: row.secret_version + (replaced ? 1 : 0),
        lagging_since: reenable ? null : row.lagging_since,
      }
      if (replaced) await auditChange(tx, grant, 'webhook_endpoint.secret_rotated', { ...after, status: row.status }, now)
      if (reenable || row.url !== url)
        await auditChange(tx, grant, reenable ? 'webhook_endpoint.enabled' : 'webhook_endpoint.updated', after, now)
      return answer(200, { ...endpointView(after), ...(replaced ? { signingSecret: replaced } : {}) })
    },
  })

  const rotateSecretOperation = defineOperation({
    kind: 'webhook_secret_rotation',
    scopes: MANAGE,
    body: NoBody,
    response: WebhookEndpointWithSecret,
    source: false,
    async before() {
      await keyRing()
    },
    async run({ tx }, ctx) {
      const grant = grantOf(ctx)
      const ring = await keyRing()
      const now = isoNow(clock)
      const row = await existingEndpoint(tx, grant, true)
      const signingSecret = await replaceSecret(tx, ring, grant, now, openSecret(ring, row))
      const after = { ...row, secret_version: row.secret_version + 1 }
      await auditChange(tx, grant, 'webhook_endpoint.secret_rotated', after, now)
      return answer(200, { ...endpointView(after), signingSecret })
    },
  })

  const disableOperation = defineOperation({
    kind: 'webhook_endpoint_disable',
    scopes: MANAGE,
    body: NoBody,
    response: WebhookEndpoint,
    source: false,
    async run({ tx }, ctx) {
      const grant = grantOf(ctx)
      const now = isoNow(clock)
      const row = await existingEndpoint(tx, grant, true)
      if (row.status === 'enabled') {
        await disableEndpoint(tx, grant.clientCode, grant.integrationId, null, now)
        await auditChange(tx, grant, 'webhook_endpoint.disabled', { ...row, status: 'disabled' }, now)
        return answer(200, endpointView({ ...row, status: 'disabled', disabled_reason: null }))
      }
      return answer(200, endpointView(row))
    },
  })

  return {
    operations: { put: putOperation, rotateSecret: rotateSecretOperation, disable: disableOperation },

    async get(grant: Grant) {
      return endpointView(await existingEndpoint(store, grant))
    },

    /** The admin service's hook: revoking a grant disables its endpoint in the same transaction. */
    async onGrantRevoked(tx: Tx, integrationId: string, clientCode: string) {
      const now = isoNow(clock)
      if (await disableEndpoint(tx, clientCode, integrationId, 'grant_revoked', now)) {
        const row = (await findEndpoint(tx, clientCode, integrationId)) as EndpointRow
        await auditEndpoint(tx, {
          clientCode,
          integrationId,
          actor: 'service',
          action: 'webhook_endpoint.disabled',
          details: { integrationId, status: 'disabled', disabledReason: 'grant_revoked', secretVersion: row.secret_version },
          change: { url: row.url, status: 'disabled', disabledReason: 'grant_revoked', secretVersion: row.secret_version },
          now,
        })
      }
    },
  }
}
