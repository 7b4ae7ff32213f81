import { createHmac, timingSafeEqual } from 'node:crypto'
import type { Grant } from '../../access/grants.ts'
import { findGrant, loadActiveGrant } from '../../access/store.ts'
import { sha256Hex } from '../../domain/canonical.ts'
import { type KeyRing, UnreadableSecretError } from '../../domain/key-ring.ts'
import { fieldProblem, Problem } from '../../domain/problems.ts'
import { type Clock, isoNow } from '../../domain/time.ts'
import { checkConfiguredDestination, type Resolver } from '../../http/destination.ts'
import type { Queryable, Store, Tx } from '../../store/store.ts'
import { defineOperation, grantOf, type OperationResult } from '../operations.ts'
import { newSigningSecret } from '../webhooks/secrets.ts'
import {
  type AdminReceiptRoute,
  type ReceiptCapability,
  type ReceiptDeliveryAttempt,
  ReceiptRoute,
  ReceiptRouteConfirm,
  ReceiptRoutePut,
  ReceiptRouteWithSecret,
} from './schema.ts'
import {
  auditRoute,
  disableRoute,
  findRoute,
  queueTestReceipt,
  type RouteRow,
  receiptCounts,
  recentAttempts,
  requestAttempts,
  routeSecretAad,
  upsertRoute,
  verifyRoute,
} from './store.ts'

/**
 * Receipt delivery to the Source (docs/design/receipt-delivery.md; docs/decisions.md, "Receipt delivery").
 *
 * - One `vendor_receipt_posting` route per client, configured by an Integration holding `payment_requests:write`;
 *   that Integration's grant governs delivery (active, `receiptDeliveryOwner` `service`). The destination rules
 *   are the webhooks' (src/http/destination.ts), checked before the transaction and again before every attempt.
 * - Every PUT issues a new signing secret (answered once) and a new one-time confirmation code, and queues a
 *   signed test receipt `{receiptId, kind: "test", occurredAt, confirmationCode}`, sent after COMMIT by the
 *   dispatcher (src/workers/receipt-dispatcher.ts) like any receipt. The code is derived from the secret
 *   (`confirmationCodeFor`) and only its digest is stored. The Source sending it back (`confirm`) is the proof
 *   `source_posting_confirmation`: the route is verified.
 * - Receipts report facts; they never acknowledge a Payment (only reconciliation lines do).
 */

const WRITE = ['payment_requests:write'] as const

/** The one-time confirmation code of a route configuration: derived from its (new) secret, so it is stored nowhere. */
export function confirmationCodeFor(secret: string, version: number): string {
  return `rcc_${createHmac('sha256', secret).update(`receipt-route-confirmation/${version}`).digest('base64url').slice(0, 22)}`
}

/** A stable receipt id: the same fact always has the same id, on every retry and in every instance. */
export function receiptIdFor(clientCode: string, kind: string, sourceKey: string): string {
  return `rcpt_${sha256Hex(`${clientCode}/${kind}/${sourceKey}`).slice(0, 32)}`
}

/** The route's signing secret, or null when no key of the ring opens it. */
export function openRouteSecret(ring: KeyRing, row: Pick<RouteRow, 'client_code' | 'secret_ciphertext'>): string | null {
  try {
    return ring.decrypt(routeSecretAad(row.client_code), row.secret_ciphertext)
  } catch (err) {
    if (err instanceof UnreadableSecretError) return null
    throw err
  }
}

const notFound = () =>
  new Problem('receipt_route_not_found', 'This client has no receipt route; configure one with PUT /v1/clients/{clientCode}/receipt-route.')

const answer = (status: OperationResult['status'], body: unknown, afterCommit?: () => void): OperationResult => ({
  status,
  body: async () => body,
  ...(afterCommit ? { afterCommit } : {}),
})

export function routeView(row: Pick<RouteRow, 'url' | 'state' | 'verified_at' | 'disabled_reason'>): ReceiptRoute {
  return {
    url: row.url,
    state: row.state,
    ...(row.verified_at ? { verifiedAt: new Date(row.verified_at).toISOString() } : {}),
    ...(row.disabled_reason ? { disabledReason: row.disabled_reason } : {}),
  }
}

const UNVERIFIED = [{ route: 'vendor_receipt_posting', missingProof: 'source_posting_confirmation' }] as const

/**
 * What the receipt-delivery read (payment-requests/service.ts) says of delivery for one Payment request: the
 * capability as it stands and every attempt to deliver one of its receipts. The grant that governs delivery is the
 * one of the Integration that configured the route (the caller's when there is no route).
 */
export async function receiptDeliveryState(
  db: Queryable,
  grant: Grant,
  requestId: string,
): Promise<{ capability: ReceiptCapability; deliveryAttempts: ReceiptDeliveryAttempt[] }> {
  const route = await findRoute(db, grant.clientCode)
  const attempts = await requestAttempts(db, grant.clientCode, requestId)
  const deliveryAttempts = attempts.map((a) => ({
    attempt: a.attempt,
    route: a.route as 'vendor_receipt_posting',
    outcome: a.outcome,
    ...(a.http_status !== null ? { httpStatus: a.http_status } : {}),
    attemptedAt: new Date(a.attempted_at).toISOString(),
    ...(a.next_attempt_at ? { nextAttemptAt: new Date(a.next_attempt_at).toISOString() } : {}),
    receiptId: a.receipt_id,
    kind: a.kind as ReceiptDeliveryAttempt['kind'],
  }))
  const governing =
    route && route.integration_id !== grant.integrationId ? await loadActiveGrant(db, route.integration_id, grant.clientCode) : grant
  return { capability: capabilityOf(route, governing ?? undefined, grant.receiptDeliveryOwner), deliveryAttempts }
}

/**
 * The capability as it stands: `route` (if any) and the active grant that governs it (the Integration's that
 * configured it; undefined when that grant is not active); `owner` is the delivery owner when there is no route.
 */
function capabilityOf(
  route: Pick<RouteRow, 'state' | 'disabled_reason'> | undefined,
  governing: Pick<Grant, 'receiptDeliveryOwner'> | undefined,
  owner: Grant['receiptDeliveryOwner'],
): ReceiptCapability {
  const disabled = (disabledReason: ReceiptCapability['disabledReason'], unverified = false): ReceiptCapability => ({
    state: 'disabled',
    disabledReason,
    unverifiedRoutes: unverified ? UNVERIFIED.map((u) => ({ ...u })) : [],
  })
  if (route?.state === 'disabled') return disabled(route.disabled_reason)
  if (route && !governing) return disabled('grant_revoked')
  if ((governing?.receiptDeliveryOwner ?? owner) === 'partner') return disabled('delivery_owner_partner')
  if (route?.state !== 'verified') return disabled('no_verified_route', true)
  return { state: 'enabled', disabledReason: null, unverifiedRoutes: [] }
}

const iso = (t: string | null) => (t === null ? null : new Date(t).toISOString())

/**
 * The operator's view of a client's route (`GET /admin/v1/clients/{clientCode}/receipt-route`): the route without
 * its secret, the grant that governs it, the capability, the receipts by status and the latest attempts.
 * Undefined when the client has no route.
 */
export async function operatorRouteView(db: Queryable, clientCode: string, now: string): Promise<AdminReceiptRoute | undefined> {
  const route = await findRoute(db, clientCode)
  if (!route) return undefined
  const grant = await findGrant(db, route.integration_id, clientCode)
  const owner: Grant['receiptDeliveryOwner'] = grant?.receipt_delivery_owner === 'service' ? 'service' : 'partner'
  const active = grant?.status === 'active' ? { receiptDeliveryOwner: owner } : undefined
  const counts = await receiptCounts(db, clientCode, now)
  const attempts = await recentAttempts(db, clientCode, 20)
  return {
    clientCode,
    ...routeView(route),
    integrationId: route.integration_id,
    version: route.version,
    grant: {
      status: grant?.status === 'active' ? 'active' : 'revoked',
      receiptDeliveryOwner: owner,
    },
    capability: capabilityOf(route, active, 'partner'),
    receipts: {
      pending: counts.pending,
      due: counts.due,
      delivered: counts.delivered,
      abandoned: counts.abandoned,
      oldestPendingAt: iso(counts.oldest_pending_at),
      unscannedFeedEvents: Number(counts.unscanned_events),
    },
    recentAttempts: attempts.map((a) => ({
      receiptId: a.receipt_id,
      kind: a.kind as AdminReceiptRoute['recentAttempts'][number]['kind'],
      externalPaymentRequestId: a.external_payment_request_id,
      attempt: a.attempt,
      outcome: a.outcome,
      httpStatus: a.http_status,
      errorClass: a.error_class,
      attemptedAt: new Date(a.attempted_at).toISOString(),
      nextAttemptAt: iso(a.next_attempt_at),
    })),
    createdAt: new Date(route.created_at).toISOString(),
    updatedAt: new Date(route.updated_at).toISOString(),
  }
}

export interface ReceiptServiceDeps {
  store: Store
  clock: Clock
  resolver: Resolver
  allowLoopback: boolean
  /** The key ring that encrypts signing secrets at rest (src/store/secret-keys.ts). */
  keyRing: () => Promise<KeyRing>
  /** Told after COMMIT when a test receipt was queued (the dispatcher's wake-up). */
  onQueued?: () => void
}

export function createReceiptService({ store, clock, resolver, allowLoopback, keyRing, onQueued }: ReceiptServiceDeps) {
  /**
   * PUT: 201 on the first configuration, 200 after; always a new signing secret (shown once), a new confirmation
   * code, and the route unverified until the Source confirms it. The URL is checked (its name resolved) and the key
   * ring loaded before the transaction: a slow DNS answer never holds a database connection.
   */
  const putOperation = defineOperation({
    kind: 'receipt_route',
    scopes: WRITE,
    body: ReceiptRoutePut,
    response: ReceiptRouteWithSecret,
    source: false,
    async before(_ctx, body) {
      await checkConfiguredDestination(body.url, { allowLoopback, resolver })
      await keyRing()
    },
    async run({ tx }, ctx, { url }) {
      const grant = grantOf(ctx)
      const ring = await keyRing()
      const now = isoNow(clock)
      const existing = await findRoute(tx, grant.clientCode, true)
      const signingSecret = newSigningSecret()
      const version = (existing?.version ?? 0) + 1
      const row = await upsertRoute(tx, {
        clientCode: grant.clientCode,
        integrationId: grant.integrationId,
        url,
        secretCiphertext: ring.encrypt(routeSecretAad(grant.clientCode), signingSecret),
        confirmationDigest: sha256Hex(confirmationCodeFor(signingSecret, version)),
        now,
      })
      const receiptId = receiptIdFor(grant.clientCode, 'test', String(row.version))
      await queueTestReceipt(tx, {
        clientCode: grant.clientCode,
        receiptId,
        version: row.version,
        payload: { receiptId, kind: 'test', occurredAt: now },
        now,
      })
      await auditRoute(tx, {
        clientCode: grant.clientCode,
        actor: `integration:${grant.integrationId}`,
        action: 'receipt_route.configured',
        details: { integrationId: grant.integrationId, state: 'unverified', version: row.version },
        change: { url, state: 'unverified', version: row.version },
        now,
      })
      return answer(existing ? 200 : 201, { ...routeView(row), signingSecret }, onQueued)
    },
  })

  /** The Source sends back the test receipt's code: verified (200); the same again changes nothing. */
  const confirmOperation = defineOperation({
    kind: 'receipt_route_confirmation',
    scopes: WRITE,
    body: ReceiptRouteConfirm,
    response: ReceiptRoute,
    source: false,
    async run({ tx }, ctx, { confirmationCode }) {
      const grant = grantOf(ctx)
      const row = await findRoute(tx, grant.clientCode, true)
      if (!row) throw notFound()
      const given = Buffer.from(sha256Hex(confirmationCode), 'utf8')
      const stored = Buffer.from(row.confirmation_digest, 'utf8')
      if (given.length !== stored.length || !timingSafeEqual(given, stored)) {
        throw fieldProblem(
          '/confirmationCode',
          'custom',
          'is not the confirmation code of the test receipt sent to the current route configuration (each PUT sends a new one)',
        )
      }
      if (row.state === 'disabled') {
        throw fieldProblem('/confirmationCode', 'custom', `the route is disabled (${row.disabled_reason}); configure it again with PUT`)
      }
      if (row.state === 'verified') return answer(200, routeView(row))
      const now = isoNow(clock)
      const verified = await verifyRoute(tx, grant.clientCode, now)
      await auditRoute(tx, {
        clientCode: grant.clientCode,
        actor: `integration:${grant.integrationId}`,
        action: 'receipt_route.verified',
        details: { integrationId: row.integration_id, state: 'verified', version: row.version },
        change: { url: row.url, state: 'verified', version: row.version },
        now,
      })
      return answer(200, routeView(verified))
    },
  })

  return {
    operations: { put: putOperation, confirm: confirmOperation },

    async get(grant: Grant): Promise<ReceiptRoute> {
      const row = await findRoute(store, grant.clientCode)
      if (!row) throw notFound()
      return routeView(row)
    },

    /**
     * The admin service's hook in a sandbox client reset's transaction: the route is configuration and is kept (a
     * verified route stays verified), its receipts are data and went with the client's data. An unverified route
     * gets its test receipt again (the same receiptId and code), so the Source can still prove it.
     */
    async onClientReset(tx: Tx, clientCode: string, now: string) {
      const route = await findRoute(tx, clientCode, true)
      if (route?.state !== 'unverified') return
      const receiptId = receiptIdFor(clientCode, 'test', String(route.version))
      await queueTestReceipt(tx, {
        clientCode,
        receiptId,
        version: route.version,
        payload: { receiptId, kind: 'test', occurredAt: now },
        now,
      })
    },

    /** The admin service's hook: revoking the grant that governs a route disables it in the same transaction. */
    async onGrantRevoked(tx: Tx, integrationId: string, clientCode: string) {
      await disableWithAudit(tx, clientCode, 'grant_revoked', isoNow(clock), integrationId)
    },
  }
}

/** Disables the route (once) and audits it, actor `service`; true when this call disabled it. */
export async function disableWithAudit(
  db: Queryable,
  clientCode: string,
  reason: NonNullable<RouteRow['disabled_reason']>,
  now: string,
  integrationId?: string,
): Promise<boolean> {
  if (!(await disableRoute(db, clientCode, reason, now, integrationId))) return false
  await auditRoute(db, {
    clientCode,
    actor: 'service',
    action: 'receipt_route.disabled',
    details: { state: 'disabled', disabledReason: reason },
    change: { state: 'disabled', disabledReason: reason },
    now,
  })
  return true
}

export type ReceiptService = ReturnType<typeof createReceiptService>
