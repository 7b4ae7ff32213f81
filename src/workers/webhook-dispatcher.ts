import type { KeyRing } from '../domain/key-ring.ts'
import { type Clock, isoNow } from '../domain/time.ts'
import type { Resolver } from '../outbound/destination.ts'
import type { ClientClocks } from '../resources/client-clocks.ts'
import { inUnitOfWork } from '../resources/unit-of-work.ts'
import {
  claimDeliveries,
  completeAttempts,
  countPending,
  deriveDeliveries,
  dueEndpoints,
  type EnabledEndpoint,
  endpointsToDerive,
  lockEndpointToDerive,
  releaseDeliveries,
  setLagging,
  skipDeliveries,
} from '../resources/webhooks/delivery-store.ts'
import { openSecret, readableTypes } from '../resources/webhooks/service.ts'
import { auditEndpoint, type DeliveryRow, disableEndpoint, type EndpointRow, findEndpoint } from '../resources/webhooks/store.ts'
import type { Store, Tx } from '../store/store.ts'
import {
  ATTEMPT_TIMEOUT_MS,
  type Claimed,
  createDeliveryEngine,
  type DeliveryChannel,
  type DeliveryWorker,
  type DisableReason,
} from './delivery-engine.ts'

/**
 * The webhook dispatcher. Guarantees:
 * - The change feed is the source: each run first turns feed events committed after an endpoint's scanned
 *   sequence into deliveries (webhooks/delivery-store.ts deriveDeliveries), in the store, so a committed change is
 *   never missed and an uncommitted one never sent.
 * - The delivery engine (delivery-engine.ts) claims, checks, signs, sends and records; this channel gives it what is
 *   a webhook's own: derivation and coalescing, the per-endpoint budget, the backlog limit, pings, and which
 *   resource types the grant may read. Each endpoint is derived and claimed in a transaction of its own, naming its
 *   client (`client_code = $1`). A lease names its holder (src/store/lease-holder.ts): a worker killed
 *   mid-delivery leaves a lease any instance takes at once; another instance then sends again: at least once.
 * - At most `perEndpoint` (10) notifications per endpoint per window of `intervalMs`, counted in the endpoint's row
 *   (the claim's transaction, under the endpoint's lock), so every instance shares the budget. A run every
 *   `intervalMs`, and one within a second (`wakeGapMs`) of a commit in this process that appended feed events, or
 *   queued a retry or a ping (`wake()`): wake-ups are coalesced, no woken run starts sooner than `wakeGapMs` after
 *   the previous run started, and an endpoint whose budget is used is served again when its window ends.
 * - Coalescing (docs/decisions.md, "Webhook coalescing, backlog and ping"): one pending notification per resource,
 *   the newest; older ones are folded into it before an attempt, or `superseded` after one. A backlog of
 *   `backlogLimit` pending notifications stops derivation for the endpoint (it lags, audited) until it drains.
 * - Before every attempt: the endpoint and its grant are read in the claim's transaction (revoked: the endpoint is
 *   disabled `grant_revoked`, nothing sent; a resource type it may no longer read: that delivery is `skipped`), the
 *   URL is checked again and its name resolved again (a non-public address: disabled `destination_unsafe`).
 * - A signing secret that no key of this instance's ring opens is left to an instance whose ring opens it (the
 *   engine logs it once and hands the claim back); the endpoint stays enabled. A previous secret (rotation
 *   overlap) that no key opens is dropped.
 * - Failures are retried on `retryScheduleMs` (1m, 5m, 30m, 2h, 6h, 12h, 24h: 8 attempts), then abandoned.
 * - Sandbox clocks (src/sandbox): with `sandbox`, each endpoint is served at its client's time
 *   (the retry schedule, what is due, the times recorded), read once per run; delivery leases and the signature
 *   timestamp stay on real time (the receiver checks the timestamp against its own clock).
 */
export interface WebhookDispatcherOptions {
  store: Store
  clock: Clock
  resolver: Resolver
  allowLoopback: boolean
  keyRing: () => Promise<KeyRing>
  intervalMs: number
  retryScheduleMs: readonly number[]
  /** Sandbox: the per-client clocks (`clock` is then `sandbox.clock`). */
  sandbox?: ClientClocks
  timeoutMs?: number
  perEndpoint?: number
  /** Endpoints served at once. */
  concurrency?: number
  /** Sockets per destination address. */
  connectionsPerDestination?: number
  /** The least time between the start of a run and a run a wake-up brings (default 1 s). */
  wakeGapMs?: number
  /** Pending notifications per endpoint past which it stops taking feed events and lags (WEBHOOK_BACKLOG_LIMIT). */
  backlogLimit?: number
  /** One line per endpoint whose secret this instance's key ring cannot open. */
  onUnreadableSecret?: (fields: { channel: string; target: string }) => void
  onError?: (err: unknown) => void
}

type Endpoint = { client_code: string; integration_id: string }
type Item = DeliveryRow & { id: string; roundAttempts: number }
interface ClaimedEndpoint extends Claimed<Item> {
  endpoint: EndpointRow
  scopes: string[]
}
type Within = <T>(clientCode: string, fn: () => T) => T

/** The endpoint's signing secrets: the current one, and the previous one while its rotation overlap lasts. */
function endpointSecrets(ring: KeyRing, endpoint: EndpointRow, nowMs: number): string[] | null {
  const current = openSecret(ring, endpoint)
  if (current === null) return null
  const secrets = [current]
  if (endpoint.previous_secret_ciphertext && endpoint.previous_expires_at && Date.parse(endpoint.previous_expires_at) > nowMs) {
    // A previous secret no key opens is simply not used for signing.
    const previous = openSecret(ring, { ...endpoint, secret_ciphertext: endpoint.previous_secret_ciphertext })
    if (previous !== null) secrets.push(previous)
  }
  return secrets
}

/** A notification's exact bytes. */
function notificationBody(clientCode: string, d: DeliveryRow): string {
  return JSON.stringify({
    clientCode,
    eventId: d.event_id,
    type: d.type,
    resource: { type: d.resource_type, id: d.resource_id },
    revision: Number(d.revision),
    occurredAt: d.occurred_at,
  })
}

export function createWebhookDispatcher(opts: WebhookDispatcherOptions): DeliveryWorker {
  const { store, clock, retryScheduleMs } = opts
  const timeoutMs = opts.timeoutMs ?? ATTEMPT_TIMEOUT_MS
  const perEndpoint = opts.perEndpoint ?? 10
  const backlogLimit = opts.backlogLimit ?? 10_000
  /** Real time: leases and signature timestamps. */
  const real = opts.sandbox?.base ?? clock
  const nowIso = () => isoNow(clock)
  /** The run's clocks, read once per run (derive is each run's first step). */
  let within: Within = (_clientCode, fn) => fn()
  let clocked = false

  async function derive(stopping: () => boolean): Promise<void> {
    const { sandbox } = opts
    const clocks = sandbox ? await sandbox.clocks(store) : undefined
    clocked = clocks !== undefined
    within = sandbox && clocks ? (clientCode, fn) => sandbox.atInstant(clocks.get(clientCode) ?? null, fn) : (_c, fn) => fn()
    for (const e of await endpointsToDerive(store, 10_000)) {
      // Stopping: what is not derived yet is derived by the next run, here or on another instance.
      if (stopping()) return
      await within(e.client_code, () => inUnitOfWork(store, ({ tx }) => deriveLocked(tx, e)))
    }
  }

  /** One endpoint's derivation, under its lock (another instance holding it derives it instead). */
  async function deriveLocked(tx: Tx, key: Endpoint): Promise<void> {
    const e = await lockEndpointToDerive(tx, key.client_code, key.integration_id, backlogLimit)
    if (!e) return
    const now = nowIso()
    if (e.grant_status !== 'active') {
      // Revoked without the admin hook having run (another path, an older instance): nothing is derived.
      const endpoint = await findEndpoint(tx, e.client_code, e.integration_id)
      if (endpoint) await disableIn(tx, endpoint, 'grant_revoked', now)
      return
    }
    await deriveEndpoint(tx, e, now)
  }

  /**
   * One endpoint's share of a run's derivation: nothing when it has scanned the whole feed (and it stops lagging if
   * it was); otherwise the next events, at most as many as its backlog has room for. A backlog at the limit leaves
   * the events in the feed (scanned later, as the backlog drains) and marks the endpoint lagging, audited once.
   */
  async function deriveEndpoint(tx: Tx, e: EnabledEndpoint, now: string): Promise<void> {
    if (BigInt(e.scanned_seq) >= BigInt(e.feed_head)) {
      if (e.lagging_since !== null) await markLagging(tx, e, null, now)
      return
    }
    const room = backlogLimit - e.pending
    if (room <= 0) {
      if (e.lagging_since === null) await markLagging(tx, e, now, now)
      return
    }
    const derived = await deriveDeliveries(tx, {
      clientCode: e.client_code,
      integrationId: e.integration_id,
      afterSeq: e.scanned_seq,
      types: readableTypes(new Set(e.scopes ?? [])),
      limit: Math.min(1000, room),
      now,
      leaseNow: isoNow(real),
    })
    const caughtUp = derived.lastSeq === null || BigInt(derived.lastSeq) >= BigInt(e.feed_head)
    if (caughtUp) {
      if (e.lagging_since !== null) await markLagging(tx, e, null, now)
    } else if (e.lagging_since === null && (await countPending(tx, e.client_code, e.integration_id, backlogLimit)) >= backlogLimit) {
      // Events are left in the feed and the backlog is full: they wait for it to drain.
      await markLagging(tx, e, now, now)
    }
  }

  /** Marks the endpoint lagging (`since`) or caught up (null), with its audit event. */
  async function markLagging(tx: Tx, e: EnabledEndpoint, since: string | null, now: string): Promise<void> {
    if (!(await setLagging(tx, e.client_code, e.integration_id, since))) return
    await auditEndpoint(tx, {
      clientCode: e.client_code,
      integrationId: e.integration_id,
      actor: 'service',
      action: since === null ? 'webhook_endpoint.caught_up' : 'webhook_endpoint.lagging',
      details: { integrationId: e.integration_id, lagging: since !== null, backlogLimit, scannedSeq: e.scanned_seq, feedHead: e.feed_head },
      change: { lagging: since !== null, since },
      now,
    })
  }

  /** True when this call disabled the endpoint. */
  async function disableIn(tx: Tx, endpoint: EndpointRow, reason: DisableReason, now: string): Promise<boolean> {
    if (!(await disableEndpoint(tx, endpoint.client_code, endpoint.integration_id, reason, now))) return false
    await auditEndpoint(tx, {
      clientCode: endpoint.client_code,
      integrationId: endpoint.integration_id,
      actor: 'service',
      action: 'webhook_endpoint.disabled',
      details: {
        integrationId: endpoint.integration_id,
        status: 'disabled',
        disabledReason: reason,
        secretVersion: endpoint.secret_version,
      },
      change: { url: endpoint.url, status: 'disabled', disabledReason: reason, secretVersion: endpoint.secret_version },
      now,
    })
    return true
  }

  const channel: DeliveryChannel<Endpoint, Item, ClaimedEndpoint> = {
    name: 'webhook-dispatcher',
    userAgent: 'InboundReceivablesService-Webhooks/1',
    idHeader: (d) => ['service-event-id', d.event_id],
    connections: opts.connectionsPerDestination ?? 10,
    maxAgents: 256,
    // A lease outlives the slowest group of attempts (all under the timeout) by a wide margin.
    leaseMs: timeoutMs * 4,
    derive,
    due: () => dueEndpoints(store, nowIso(), 10_000, { leaseNow: isoNow(real), clocked, windowMs: opts.intervalMs, budget: perEndpoint }),
    within: (e, fn) => within(e.client_code, fn),
    async claim(e, lease) {
      const claim = await inUnitOfWork(store, ({ tx }) =>
        claimDeliveries(tx, {
          clientCode: e.client_code,
          integrationId: e.integration_id,
          ...lease,
          limit: perEndpoint,
          budget: perEndpoint,
          windowMs: opts.intervalMs,
        }),
      )
      if (!claim.endpoint) return null
      return {
        clientCode: e.client_code,
        target: `webhook endpoint ${e.integration_id}/${e.client_code}`,
        url: claim.endpoint.status === 'enabled' ? claim.endpoint.url : null,
        grantActive: claim.grantScopes !== null || claim.endpoint.status !== 'enabled',
        items: claim.deliveries.map((d) => ({ ...d, id: d.delivery_id, roundAttempts: d.round_attempts })),
        retryAt: claim.exhaustedUntil,
        endpoint: claim.endpoint,
        scopes: claim.grantScopes ?? [],
      }
    },
    async admit(c, token) {
      const readable = new Set<string>(readableTypes(new Set(c.scopes)))
      // A ping carries nothing of any resource: every grant may receive it.
      const mayRead = (d: Item) => d.type === 'ping' || readable.has(d.resource_type)
      const unreadable = c.items.filter((d) => !mayRead(d)).map((d) => d.id)
      await skipDeliveries(store, c.clientCode, c.endpoint.integration_id, token, unreadable, nowIso())
      return c.items.filter(mayRead)
    },
    secrets: (ring, { endpoint }) => endpointSecrets(ring, endpoint, clock.now().getTime()),
    body: (d, c) => notificationBody(c.clientCode, d),
    // A ping is attempted once: its failure is what the integrator asked to see.
    schedule: (d) => (d.type === 'ping' ? [] : retryScheduleMs),
    complete: (c, token, outcomes) =>
      completeAttempts(
        store,
        c.clientCode,
        c.endpoint.integration_id,
        token,
        outcomes.map(({ id, ...o }) => ({ deliveryId: id, ...o })),
      ),
    release: (c, token, ids) => releaseDeliveries(store, c.clientCode, c.endpoint.integration_id, token, ids),
    async disable(c, reason) {
      await inUnitOfWork(store, async ({ tx }) => {
        await disableIn(tx, c.endpoint, reason, nowIso())
      })
    },
  }

  return createDeliveryEngine(
    {
      store,
      clock,
      realClock: real,
      resolver: opts.resolver,
      allowLoopback: opts.allowLoopback,
      keyRing: opts.keyRing,
      intervalMs: opts.intervalMs,
      timeoutMs,
      concurrency: opts.concurrency ?? 16,
      wakeGapMs: opts.wakeGapMs ?? 1000,
      ...(opts.onUnreadableSecret ? { onUnreadableSecret: opts.onUnreadableSecret } : {}),
      ...(opts.onError ? { onError: opts.onError } : {}),
    },
    channel,
  )
}

export type WebhookDispatcher = DeliveryWorker
