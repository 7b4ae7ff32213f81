import { randomUUID } from 'node:crypto'
import { type Agent, request } from 'undici'
import { loadActiveGrant } from '../access/store.ts'
import type { KeyRing } from '../domain/key-ring.ts'
import { type Clock, isoNow } from '../domain/time.ts'
import {
  ATTEMPT_TIMEOUT_MS,
  type Destination,
  parseDestination,
  pinnedAgent,
  ResolutionError,
  type Resolver,
  resolveDestination,
  UnsafeDestinationError,
} from '../http/destination.ts'
import type { ClientClocks } from '../resources/client-clocks.ts'
import { inUnitOfWork } from '../resources/unit-of-work.ts'
import {
  type AttemptOutcome,
  claimDeliveries,
  completeAttempts,
  countPending,
  deriveDeliveries,
  dueEndpoints,
  type EnabledEndpoint,
  lockEnabledEndpoints,
  notePendingDeliveries,
  releaseDeliveries,
  setLagging,
  skipDeliveries,
} from '../resources/webhooks/delivery-store.ts'
import { signatureHeader } from '../resources/webhooks/secrets.ts'
import { openSecret, readableTypes } from '../resources/webhooks/service.ts'
import { auditEndpoint, type DeliveryRow, disableEndpoint, type EndpointRow, findEndpoint } from '../resources/webhooks/store.ts'
import { claimKey } from '../store/lease-holder.ts'
import type { Store, Tx } from '../store/store.ts'
import { createWorker, serveInLanes, type Worker } from './worker.ts'

/**
 * The webhook dispatcher. Guarantees:
 * - The change feed is the source: each run first turns feed events committed after an endpoint's scanned
 *   sequence into deliveries (webhooks/delivery-store.ts deriveDeliveries), in the store, so a committed change is
 *   never missed and an uncommitted one never sent.
 * - Shared by instances: an endpoint's due deliveries are claimed as leases (UPDATE ... FOR UPDATE SKIP
 *   LOCKED, a token per claim); outcomes are written only under that token, so a worker whose lease was
 *   taken changes nothing. A lease names its holder (src/store/lease-holder.ts): a worker killed mid-delivery
 *   (or whose lock connection was lost) leaves a lease any instance takes at once, and a lease whose holder
 *   still looks alive but no longer renews expires; another instance then sends again: at least once, never lost.
 * - At most `perEndpoint` (10) notifications per endpoint per window of `intervalMs`, counted in the endpoint's row
 *   (the claim's transaction, under the endpoint's lock), so every instance shares the budget. A run every
 *   `intervalMs`, and one within a second (`wakeGapMs`) of a commit in this process that appended feed events, or
 *   queued a retry or a ping (`wake()`): wake-ups are coalesced, no woken run starts sooner than `wakeGapMs` after
 *   the previous run started, and an endpoint whose budget is used is served again when its window ends.
 * - Coalescing (docs/decisions.md, "Webhook coalescing, backlog and ping"): one pending notification per resource,
 *   the newest; older ones are folded into it before an attempt, or `superseded` after one. A backlog of
 *   `backlogLimit` pending notifications stops derivation for the endpoint (it lags, audited) until it drains.
 * - Before every attempt: the grant is re-read (revoked: the endpoint is disabled `grant_revoked`, nothing
 *   sent; a resource type it may no longer read: that delivery is `skipped`), the URL is checked again and
 *   its name resolved again (a non-public address: disabled `destination_unsafe`, nothing sent), and the
 *   connection goes to the checked address (pinnedAgent).
 * - A signing secret that no key of the ring opens (the encryption key changed without the old one being kept as
 *   a previous key): the endpoint is disabled `signing_secret_unreadable` (audited), every pending delivery says
 *   so in its `lastError`, nothing is sent. They are sent once the integrator has a new secret (rotate-secret or
 *   PUT) and the endpoint is enabled again. A previous secret (rotation overlap) that no key opens is dropped.
 * - Each attempt: 5 s for everything, no redirects (a 3xx is a failure), the response body discarded after
 *   at most 64 KiB, a bounded number of sockets per destination and of endpoints served at once.
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
  onError?: (err: unknown) => void
}

const USER_AGENT = 'InboundReceivablesService-Webhooks/1'
const MAX_AGENTS = 256

export function createWebhookDispatcher(opts: WebhookDispatcherOptions): Worker {
  const { store, clock, resolver, allowLoopback, retryScheduleMs } = opts
  const timeoutMs = opts.timeoutMs ?? ATTEMPT_TIMEOUT_MS
  const perEndpoint = opts.perEndpoint ?? 10
  const concurrency = opts.concurrency ?? 16
  const connections = opts.connectionsPerDestination ?? 10
  // A lease outlives the slowest group of attempts (all under the timeout) by a wide margin.
  const leaseMs = timeoutMs * 4
  const agents = new Map<string, Agent>()
  /** Set by stop(): the run in progress finishes the endpoints it is serving and starts nothing more. */
  let stopping = false

  function agentFor(dest: Destination, address: { address: string; family: 4 | 6 }): Agent {
    const key = `${dest.url.origin}|${address.address}`
    let agent = agents.get(key)
    if (!agent) {
      if (agents.size >= MAX_AGENTS) {
        const [oldestKey, oldest] = agents.entries().next().value as [string, Agent]
        agents.delete(oldestKey)
        void oldest.close().catch(() => {})
      }
      agent = pinnedAgent(address, { connections, timeoutMs })
      agents.set(key, agent)
    }
    return agent
  }

  const nowIso = () => isoNow(clock)
  const backlogLimit = opts.backlogLimit ?? 10_000
  /**
   * An endpoint that used its budget with notifications still due is served again when its window ends (one timer
   * for the earliest such end), not only at the next scheduled run.
   */
  let wakeTimer: NodeJS.Timeout | null = null
  let wakeTimerAt = Number.POSITIVE_INFINITY
  function wakeAt(inMs: number): void {
    const at = performance.now() + Math.max(0, inMs) + 5
    if (stopping || at >= wakeTimerAt) return
    if (wakeTimer) clearTimeout(wakeTimer)
    wakeTimerAt = at
    wakeTimer = setTimeout(() => {
      wakeTimer = null
      wakeTimerAt = Number.POSITIVE_INFINITY
      worker.wake()
    }, Math.max(0, inMs) + 5)
    wakeTimer.unref()
  }
  /** Real time: leases and signature timestamps. */
  const real = opts.sandbox?.base ?? clock
  type Within = <T>(clientCode: string, fn: () => T) => T
  const onClockTime: Within = (_clientCode, fn) => fn()

  /** Every enabled endpoint, in chunks of 100 (one transaction each), up to 1,000 feed events each per run. */
  async function derive(within: Within): Promise<void> {
    let after: { clientCode: string; integrationId: string } | null = null
    for (;;) {
      after = await deriveChunk(after, within)
      // Stopping: what is not derived yet is derived by the next run, here or on another instance.
      if (!after || stopping) return
    }
  }

  async function deriveChunk(after: { clientCode: string; integrationId: string } | null, within: Within) {
    return inUnitOfWork(store, async ({ tx }) => {
      const chunk = await lockEnabledEndpoints(tx, after, 100)
      for (const e of chunk) {
        const now = within(e.client_code, nowIso)
        if (e.grant_status !== 'active') {
          // Revoked without the admin hook having run (another path, an older instance): nothing is derived.
          const endpoint = await findEndpoint(tx, e.client_code, e.integration_id)
          if (endpoint) await disableIn(tx, endpoint, 'grant_revoked', now)
          continue
        }
        await deriveEndpoint(tx, e, now)
      }
      const last = chunk.at(-1)
      return last ? { clientCode: last.client_code, integrationId: last.integration_id } : null
    })
  }

  /**
   * One endpoint's share of a run's derivation: nothing when it has scanned the whole feed (and it stops lagging if
   * it was); otherwise the next events, at most as many as its backlog has room for. A backlog at the limit leaves
   * the events in the feed (scanned later, as the backlog drains) and marks the endpoint lagging, audited once.
   */
  async function deriveEndpoint(tx: Tx, e: EnabledEndpoint, now: string): Promise<void> {
    const atHead = BigInt(e.scanned_seq) >= BigInt(e.feed_head)
    if (atHead) {
      if (e.lagging_since !== null) await markLagging(tx, e, null, now)
      return
    }
    const pending = await countPending(tx, e.client_code, e.integration_id, backlogLimit)
    const room = backlogLimit - pending
    if (room <= 0) {
      if (e.lagging_since === null) await markLagging(tx, e, now, now)
      return
    }
    const limit = Math.min(1000, room)
    const derived = await deriveDeliveries(tx, {
      clientCode: e.client_code,
      integrationId: e.integration_id,
      afterSeq: e.scanned_seq,
      types: readableTypes(new Set(e.scopes ?? [])),
      limit,
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

  type Reason = NonNullable<EndpointRow['disabled_reason']>

  async function disable(endpoint: EndpointRow, reason: Reason) {
    await inUnitOfWork(store, async ({ tx }) => {
      const now = nowIso()
      if (!(await disableIn(tx, endpoint, reason, now))) return
      // The integrator has to act (a new secret): the delivery log says why nothing goes out.
      if (reason === 'signing_secret_unreadable') await notePendingDeliveries(tx, endpoint.client_code, endpoint.integration_id, reason)
    })
  }

  /** True when this call disabled the endpoint. */
  async function disableIn(tx: Tx, endpoint: EndpointRow, reason: Reason, now: string): Promise<boolean> {
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

  function errorClass(err: unknown): NonNullable<AttemptOutcome['errorClass']> {
    const e = err as { name?: string; code?: string; cause?: { code?: string } }
    const code = e.code ?? e.cause?.code ?? ''
    if (e.name === 'TimeoutError' || e.name === 'AbortError' || /TIMEOUT/.test(code)) return 'timeout'
    if (code === 'ECONNREFUSED') return 'connection_refused'
    if (/CERT|TLS|SSL|SELF_SIGNED|UNABLE_TO_VERIFY/.test(code)) return 'tls_error'
    return 'connection_error'
  }

  /** One attempt: the outcome, never thrown. */
  async function attempt(dest: Destination, d: DeliveryRow, endpoint: EndpointRow, secrets: string[]): Promise<AttemptOutcome | 'unsafe'> {
    const attemptedAt = nowIso()
    const started = performance.now()
    const n = d.round_attempts + 1
    const failed = (errorClass: NonNullable<AttemptOutcome['errorClass']>, httpStatus: number | null): AttemptOutcome => {
      // A ping is attempted once: its failure is what the integrator asked to see.
      const abandon = n > retryScheduleMs.length || d.type === 'ping'
      return {
        deliveryId: d.delivery_id,
        status: abandon ? 'abandoned' : 'pending',
        nextAttemptAt: abandon ? null : new Date(clock.now().getTime() + (retryScheduleMs[n - 1] as number)).toISOString(),
        lastError: httpStatus === null ? errorClass : `${errorClass} ${httpStatus}`,
        attemptedAt,
        durationMs: Math.round(performance.now() - started),
        httpStatus,
        errorClass,
      }
    }
    let address: { address: string; family: 4 | 6 }
    try {
      address = await resolveDestination(dest, resolver)
    } catch (err) {
      if (err instanceof UnsafeDestinationError) return 'unsafe'
      if (err instanceof ResolutionError) return failed('dns_error', null)
      throw err
    }
    const body = JSON.stringify({
      clientCode: endpoint.client_code,
      eventId: d.event_id,
      type: d.type,
      resource: { type: d.resource_type, id: d.resource_id },
      revision: Number(d.revision),
      occurredAt: d.occurred_at,
    })
    const t = Math.floor(real.now().getTime() / 1000)
    try {
      const res = await request(dest.url, {
        method: 'POST',
        dispatcher: agentFor(dest, address),
        headers: {
          'content-type': 'application/json',
          'user-agent': USER_AGENT,
          'service-event-id': d.event_id,
          'service-signature': signatureHeader(secrets, t, body),
        },
        body,
        signal: AbortSignal.timeout(timeoutMs),
      })
      // The body is never needed: read at most 64 KiB of it (so the socket can be reused), then drop it.
      await res.body.dump({ limit: 64 * 1024 }).catch(() => {})
      const status = res.statusCode
      if (status >= 200 && status < 300) {
        return {
          deliveryId: d.delivery_id,
          status: 'delivered',
          nextAttemptAt: null,
          lastError: null,
          attemptedAt,
          durationMs: Math.round(performance.now() - started),
          httpStatus: status,
          errorClass: null,
        }
      }
      return failed(status >= 300 && status < 400 ? 'redirect' : 'http_status', status)
    } catch (err) {
      return failed(errorClass(err), null)
    }
  }

  /** Claims, checks and sends one endpoint's due deliveries (at most perEndpoint). */
  async function serveEndpoint(clientCode: string, integrationId: string): Promise<number> {
    // No claim while the instance's lease lock is not held (src/store/lease-holder.ts).
    const holder = claimKey(store.leaseHolder)
    if (holder === 'not_held') return 0
    const token = randomUUID()
    const now = clock.now()
    const realNow = real.now()
    const claim = await inUnitOfWork(store, ({ tx }) =>
      claimDeliveries(tx, {
        clientCode,
        integrationId,
        token,
        now: now.toISOString(),
        leaseNow: realNow.toISOString(),
        leaseUntil: new Date(realNow.getTime() + leaseMs).toISOString(),
        limit: perEndpoint,
        holder,
        budget: perEndpoint,
        windowMs: opts.intervalMs,
      }),
    )
    if (claim.exhaustedUntil !== null) wakeAt(Date.parse(claim.exhaustedUntil) - realNow.getTime())
    const claimed = claim.deliveries
    if (claimed.length === 0) return 0
    const ids = claimed.map((d) => d.delivery_id)
    const endpoint = await findEndpoint(store, clientCode, integrationId)
    if (endpoint?.status !== 'enabled') {
      await releaseDeliveries(store, clientCode, integrationId, token, ids)
      return 0
    }
    // Authorization as it is now: a revoked grant disables the endpoint and nothing is sent.
    const grant = await loadActiveGrant(store, integrationId, clientCode)
    if (!grant) {
      await disable(endpoint, 'grant_revoked')
      await releaseDeliveries(store, clientCode, integrationId, token, ids)
      return 0
    }
    const readable = new Set<string>(readableTypes(grant.scopes))
    // A ping carries nothing of any resource: every grant may receive it.
    const mayRead = (d: DeliveryRow) => d.type === 'ping' || readable.has(d.resource_type)
    const unreadable = claimed.filter((d) => !mayRead(d))
    await skipDeliveries(
      store,
      clientCode,
      integrationId,
      token,
      unreadable.map((d) => d.delivery_id),
      nowIso(),
    )
    const toSend = claimed.filter(mayRead)
    if (toSend.length === 0) return 0
    let dest: Destination
    try {
      dest = parseDestination(endpoint.url, { allowLoopback })
    } catch (err) {
      if (!(err instanceof UnsafeDestinationError)) throw err
      await disable(endpoint, 'destination_unsafe')
      await releaseDeliveries(store, clientCode, integrationId, token, ids)
      return 0
    }
    const ring = await opts.keyRing()
    const current = openSecret(ring, endpoint)
    if (current === null) {
      await disable(endpoint, 'signing_secret_unreadable')
      await releaseDeliveries(store, clientCode, integrationId, token, ids)
      return 0
    }
    const secrets = [current]
    if (endpoint.previous_secret_ciphertext && endpoint.previous_expires_at && Date.parse(endpoint.previous_expires_at) > now.getTime()) {
      const previous = openSecret(ring, { ...endpoint, secret_ciphertext: endpoint.previous_secret_ciphertext })
      if (previous !== null) secrets.push(previous)
    }
    // The lock the claim was taken under is gone: the deliveries are forfeited (any instance sends them now).
    if (holder !== null && store.leaseHolder?.current() !== holder) return 0
    const results = await Promise.all(toSend.map((d) => attempt(dest, d, endpoint, secrets)))
    const outcomes = results.filter((r): r is AttemptOutcome => r !== 'unsafe')
    await completeAttempts(store, clientCode, integrationId, token, outcomes)
    if (outcomes.length < results.length) {
      // The name now resolves to a non-public address: nothing was sent to it.
      await disable(endpoint, 'destination_unsafe')
      await releaseDeliveries(
        store,
        clientCode,
        integrationId,
        token,
        toSend.filter((_, i) => results[i] === 'unsafe').map((d) => d.delivery_id),
      )
    }
    return outcomes.length
  }

  /** One run: derive deliveries from the feed, then serve every endpoint with due deliveries; true when it attempted any. */
  async function runOnce(): Promise<boolean> {
    const { sandbox } = opts
    const clocks = sandbox ? await sandbox.clocks(store) : undefined
    const within: Within = sandbox && clocks ? (clientCode, fn) => sandbox.atInstant(clocks.get(clientCode) ?? null, fn) : onClockTime
    await derive(within)
    if (stopping) return false
    const endpoints = await dueEndpoints(store, nowIso(), 10_000, {
      leaseNow: isoNow(real),
      clocked: clocks !== undefined,
      windowMs: opts.intervalMs,
      budget: perEndpoint,
    })
    // Stopping: the endpoints being served finish (their deliveries sent and recorded), no other is claimed.
    const attempts = await serveInLanes(
      endpoints,
      concurrency,
      (e) => within(e.client_code, () => serveEndpoint(e.client_code, e.integration_id)),
      { stopping: () => stopping, onError: opts.onError },
    )
    return attempts > 0
  }

  const worker = createWorker({
    name: 'webhook-dispatcher',
    // Runs at start, then every intervalMs measured from the start of each run; never back to back, whatever a run
    // sent (the per-run budget of `perEndpoint` notifications per endpoint).
    intervalMs: opts.intervalMs,
    runOnce,
    minWakeGapMs: opts.wakeGapMs ?? 1000,
    onStarting: () => {
      stopping = false
    },
    // No run starts any more; the one in progress finishes the endpoints it is serving (every attempt has its
    // timeout, 5 s) and records their outcomes, then stops: nothing claimed is left to wait for its lease.
    onStopping: () => {
      stopping = true
    },
    afterStop: async () => {
      if (wakeTimer) clearTimeout(wakeTimer)
      wakeTimer = null
      wakeTimerAt = Number.POSITIVE_INFINITY
      await Promise.all([...agents.values()].map((a) => a.close().catch(() => {})))
      agents.clear()
    },
    onError: (err) => opts.onError?.(err),
  })
  return worker
}

export type WebhookDispatcher = Worker
