import { randomUUID } from 'node:crypto'
import { type Agent, request } from 'undici'
import { loadActiveGrant } from '../access/store.ts'
import type { KeyRing } from '../domain/key-ring.ts'
import { money } from '../domain/money.ts'
import { type Clock, isoNow } from '../domain/time.ts'
import {
  ATTEMPT_TIMEOUT_MS,
  type Destination,
  parseDestination,
  pinnedAgent,
  ResolutionError,
  type ResolvedAddress,
  type Resolver,
  resolveDestination,
  UnsafeDestinationError,
} from '../http/destination.ts'
import {
  claimReceipts,
  completeReceiptAttempts,
  dueClients,
  insertReceipts,
  lockVerifiedRoutes,
  type NewReceipt,
  type ReceiptOutcome,
  type ReceiptRow,
  releaseReceipts,
  type ScannedEvent,
  scanFeed,
} from '../resources/receipts/delivery-store.ts'
import { confirmationCodeFor, disableWithAudit, openRouteSecret, receiptIdFor } from '../resources/receipts/service.ts'
import { findRoute, type RouteDisabledReason, type RouteRow } from '../resources/receipts/store.ts'
import { inUnitOfWork } from '../resources/unit-of-work.ts'
import { signatureHeader } from '../resources/webhooks/secrets.ts'
import { claimKey } from '../store/lease-holder.ts'
import type { Store } from '../store/store.ts'
import { createWorker, serveInLanes, type Worker } from './worker.ts'

/**
 * The receipt dispatcher (docs/design/receipt-delivery.md). Guarantees:
 * - Receipts come from committed facts: each run walks the change feed of every verified route after its scanned
 *   sequence (commit order) and turns each `payment.confirmed`, `refund.succeeded` and `payment.reversed` event
 *   into one receipt row, its payload read from the `payments` row (and the take-back record) and fixed then, its id stable (`receiptIdFor`), in the same transaction that moves the
 *   sequence. Nothing committed is missed, nothing uncommitted is sent. While the governing grant says
 *   `receiptDeliveryOwner` `partner` the sequence moves on and nothing is created: the partner delivers those.
 * - Shared by instances: a client's due receipts are claimed as leases (UPDATE ... FOR UPDATE SKIP LOCKED, a token
 *   per claim, the holder's key: src/store/lease-holder.ts); outcomes are written only under the token. A killed
 *   worker's receipts are taken again at once when its lock is gone, else when the lease expires: at least once.
 * - Before every attempt: the grant of the Integration that configured the route is re-read (not active: the route
 *   is disabled `grant_revoked`, nothing sent; owner `partner`: nothing sent, the receipts wait), the URL checked
 *   and its name resolved again (non-public: disabled `destination_unsafe`), and the connection goes to the checked
 *   address (pinnedAgent). A secret no key opens disables the route `signing_secret_unreadable`.
 * - Each attempt: `Service-Signature` (the webhook scheme, src/resources/webhooks/secrets.ts) under the route's own
 *   secret, the same receiptId on every retry; 5 s for everything, no redirects (a 3xx fails), the response body
 *   discarded after at most 64 KiB; failures retried on the webhook schedule, then abandoned.
 * - An unverified route is sent its test receipt only; a verified one, its real receipts only.
 * - Delivering a receipt never acknowledges a Payment: nothing here writes outside the receipt tables and the route.
 */
export interface ReceiptDispatcherOptions {
  store: Store
  clock: Clock
  resolver: Resolver
  allowLoopback: boolean
  keyRing: () => Promise<KeyRing>
  intervalMs: number
  retryScheduleMs: readonly number[]
  /** Real time for leases and signature timestamps (the sandbox's base clock); `clock` when omitted. */
  realClock?: Clock
  timeoutMs?: number
  /** Connections to one Source, so receipts in flight to it at once (default 10). */
  perClient?: number
  /** Receipts claimed per client per run, sent over at most `perClient` connections (default 50). */
  perRun?: number
  /** Clients served at once. */
  concurrency?: number
  /** The least time between the start of a run and a run a wake-up brings (default 1 s). */
  wakeGapMs?: number
  onError?: (err: unknown) => void
}

const USER_AGENT = 'InboundReceivablesService-Receipts/1'
const MAX_AGENTS = 64

export function createReceiptDispatcher(opts: ReceiptDispatcherOptions): Worker {
  const { store, clock, resolver, allowLoopback, retryScheduleMs } = opts
  const real = opts.realClock ?? clock
  const timeoutMs = opts.timeoutMs ?? ATTEMPT_TIMEOUT_MS
  const perClient = opts.perClient ?? 10
  const perRun = opts.perRun ?? 50
  const concurrency = opts.concurrency ?? 16
  // A lease outlives the slowest run of attempts (perRun over perClient connections, each under the timeout) by a
  // wide margin.
  const leaseMs = timeoutMs * (Math.ceil(perRun / perClient) + 3)
  const agents = new Map<string, Agent>()
  let stopping = false

  function agentFor(dest: Destination, address: ResolvedAddress): Agent {
    const key = `${dest.url.origin}|${address.address}`
    let agent = agents.get(key)
    if (!agent) {
      if (agents.size >= MAX_AGENTS) {
        const [oldestKey, oldest] = agents.entries().next().value as [string, Agent]
        agents.delete(oldestKey)
        void oldest.close().catch(() => {})
      }
      agent = pinnedAgent(address, { connections: perClient, timeoutMs })
      agents.set(key, agent)
    }
    return agent
  }

  /** Every verified route, in chunks of 100 (one transaction each), up to 1,000 feed events each per run. */
  async function derive(): Promise<void> {
    let after: string | null = null
    for (;;) {
      const from: string | null = after
      after = await inUnitOfWork(store, async ({ tx }) => {
        const chunk = await lockVerifiedRoutes(tx, from, 100)
        const now = isoNow(clock)
        for (const r of chunk) {
          if (r.grant_status !== 'active') {
            await disableWithAudit(tx, r.client_code, 'grant_revoked', now, r.integration_id)
            continue
          }
          const events = await scanFeed(tx, r.client_code, r.scanned_seq, 1000)
          const last = events.at(-1)
          if (!last) continue
          // Owner `partner`: the partner delivers what is confirmed meanwhile; the sequence moves on all the same.
          const receipts = r.receipt_delivery_owner === 'service' ? receiptsOf(r.client_code, events) : []
          await insertReceipts(tx, r.client_code, receipts, last.seq, now)
        }
        return chunk.length === 100 ? (chunk.at(-1)?.client_code ?? null) : null
      })
      if (!after || stopping) return
    }
  }

  /**
   * The receipts a scanned stretch of the feed gives, in commit order: one per confirmed Payment, one per refund
   * success, one per reversal (each its own event, its own take-back record and receiptId: two reversals committed
   * between two scans give two receipts). A refund's or a reversal's split between unapplied and allocated money is
   * the one the take-back rule decided when it happened (payments/take-back.ts), recorded with it.
   */
  function receiptsOf(clientCode: string, events: readonly ScannedEvent[]): NewReceipt[] {
    const receipts: NewReceipt[] = []
    for (const e of events) {
      if (e.external_payment_request_id === null || e.currency === null) continue
      const requestId = e.external_payment_request_id
      const currency = e.currency
      let kind: NewReceipt['kind']
      let sourceKey: string
      let amountMinor: bigint
      let unappliedMinor: bigint
      let occurredAt: string
      if (e.type === 'payment.confirmed') {
        kind = 'payment'
        sourceKey = requestId
        amountMinor = BigInt(e.amount_minor as string)
        unappliedMinor = BigInt(e.unapplied_minor as string)
        occurredAt = new Date(e.decided_at as string).toISOString()
      } else if (e.take_back_key !== null && (e.type === 'refund.succeeded' || e.type === 'payment.reversed')) {
        kind = e.type === 'refund.succeeded' ? 'refund' : 'reversal'
        // The same source keys as before the take-back record existed: a receipt's id never changes.
        sourceKey = kind === 'refund' ? `${requestId}/${e.take_back_key.slice('refund/'.length)}` : `${requestId}/reversal/${e.revision}`
        amountMinor = BigInt(e.take_back_minor as string)
        unappliedMinor = BigInt(e.take_back_unapplied_minor as string)
        occurredAt = new Date(e.take_back_occurred_at as string).toISOString()
      } else continue
      const allocatedMinor = amountMinor - unappliedMinor
      const receiptId = receiptIdFor(clientCode, kind, sourceKey)
      receipts.push({
        receiptId,
        kind,
        sourceKey,
        requestId,
        payload: {
          receiptId,
          kind,
          externalPaymentRequestId: requestId,
          providerPaymentId: e.provider_payment_id,
          occurredAt,
          amount: money(amountMinor, currency),
          allocations:
            allocatedMinor > 0n ? [{ externalReceivableId: e.external_receivable_id, amount: money(allocatedMinor, currency) }] : [],
          unappliedAmount: money(unappliedMinor, currency),
        },
      })
    }
    return receipts
  }

  function errorClass(err: unknown): string {
    const e = err as { name?: string; code?: string; cause?: { code?: string } }
    const code = e.code ?? e.cause?.code ?? ''
    if (e.name === 'TimeoutError' || e.name === 'AbortError' || /TIMEOUT/.test(code)) return 'timeout'
    if (code === 'ECONNREFUSED') return 'connection_refused'
    if (/CERT|TLS|SSL|SELF_SIGNED|UNABLE_TO_VERIFY/.test(code)) return 'tls_error'
    return 'connection_error'
  }

  /** One attempt: the outcome, never thrown. */
  async function attempt(
    dest: Destination,
    address: ResolvedAddress,
    r: ReceiptRow,
    body: string,
    secret: string,
  ): Promise<ReceiptOutcome> {
    const started = clock.now()
    const attemptedAt = started.toISOString()
    const n = r.round_attempts + 1
    // The next attempt is due the schedule's interval after this one started.
    const failed = (cls: string, httpStatus: number | null): ReceiptOutcome => {
      const abandon = n > retryScheduleMs.length
      return {
        receiptId: r.receipt_id,
        status: abandon ? 'abandoned' : 'pending',
        nextAttemptAt: abandon ? null : new Date(started.getTime() + (retryScheduleMs[n - 1] as number)).toISOString(),
        lastError: httpStatus === null ? cls : `${cls} ${httpStatus}`,
        attemptedAt,
        httpStatus,
        errorClass: cls,
      }
    }
    const t = Math.floor(real.now().getTime() / 1000)
    try {
      const res = await request(dest.url, {
        method: 'POST',
        dispatcher: agentFor(dest, address),
        headers: {
          'content-type': 'application/json',
          'user-agent': USER_AGENT,
          'service-receipt-id': r.receipt_id,
          'service-signature': signatureHeader([secret], t, body),
        },
        body,
        signal: AbortSignal.timeout(timeoutMs),
      })
      // The body is never needed: read at most 64 KiB of it (so the socket can be reused), then drop it.
      await res.body.dump({ limit: 64 * 1024 }).catch(() => {})
      const status = res.statusCode
      if (status >= 200 && status < 300) {
        return {
          receiptId: r.receipt_id,
          status: 'delivered',
          nextAttemptAt: null,
          lastError: null,
          attemptedAt,
          httpStatus: status,
          errorClass: null,
        }
      }
      return failed(status >= 300 && status < 400 ? 'redirect' : 'http_status', status)
    } catch (err) {
      return failed(errorClass(err), null)
    }
  }

  async function disable(clientCode: string, reason: RouteDisabledReason, integrationId: string) {
    await inUnitOfWork(store, ({ tx }) => disableWithAudit(tx, clientCode, reason, isoNow(clock), integrationId))
  }

  /** Checks the route and its grant, then claims and sends one client's due receipts (at most perRun). */
  async function serveClient(clientCode: string): Promise<number> {
    const holder = claimKey(store.leaseHolder)
    if (holder === 'not_held') return 0
    const route = await findRoute(store, clientCode)
    if (!route || route.state === 'disabled') return 0
    // Authorization as it is now: a revoked grant disables the route and nothing is sent.
    const grant = await loadActiveGrant(store, route.integration_id, clientCode)
    if (!grant) {
      await disable(clientCode, 'grant_revoked', route.integration_id)
      return 0
    }
    const tests = route.state === 'unverified'
    // Owner `partner`: no receipt goes out (they wait); a test receipt still proves the route.
    if (!tests && grant.receiptDeliveryOwner !== 'service') return 0
    let dest: Destination
    try {
      dest = parseDestination(route.url, { allowLoopback })
    } catch (err) {
      if (!(err instanceof UnsafeDestinationError)) throw err
      await disable(clientCode, 'destination_unsafe', route.integration_id)
      return 0
    }
    const secret = openRouteSecret(await opts.keyRing(), route)
    if (secret === null) {
      await disable(clientCode, 'signing_secret_unreadable', route.integration_id)
      return 0
    }
    const token = randomUUID()
    const realNow = real.now()
    const claimed = await claimReceipts(store, {
      clientCode,
      tests,
      token,
      now: isoNow(clock),
      leaseNow: realNow.toISOString(),
      leaseUntil: new Date(realNow.getTime() + leaseMs).toISOString(),
      limit: perRun,
      holder,
    })
    if (claimed.length === 0) return 0
    // The name is resolved again before the attempts: a non-public address disables the route, nothing is sent.
    let address: ResolvedAddress
    try {
      address = await resolveDestination(dest, resolver)
    } catch (err) {
      if (err instanceof UnsafeDestinationError) {
        await releaseReceipts(store, clientCode, token)
        await disable(clientCode, 'destination_unsafe', route.integration_id)
        return 0
      }
      if (!(err instanceof ResolutionError)) throw err
      const outcomes = claimed.map((r) => dnsFailure(r))
      await completeReceiptAttempts(store, clientCode, token, outcomes)
      return outcomes.length
    }
    // The lock the claim was taken under is gone: the receipts are forfeited (any instance sends them now).
    if (holder !== null && store.leaseHolder?.current() !== holder) return 0
    const sendable = claimed.filter((r) => r.kind !== 'test' || r.source_key === String(route.version))
    const outcomes = await Promise.all(sendable.map((r) => attempt(dest, address, r, bodyOf(r, route, secret), secret)))
    await completeReceiptAttempts(store, clientCode, token, outcomes)
    // A test receipt of an earlier configuration (claimed before a PUT replaced it) proves nothing: not sent.
    if (sendable.length < claimed.length) await releaseReceipts(store, clientCode, token)
    return outcomes.length
  }

  function dnsFailure(r: ReceiptRow): ReceiptOutcome {
    const n = r.round_attempts + 1
    const abandon = n > retryScheduleMs.length
    const now = clock.now()
    return {
      receiptId: r.receipt_id,
      status: abandon ? 'abandoned' : 'pending',
      nextAttemptAt: abandon ? null : new Date(now.getTime() + (retryScheduleMs[n - 1] as number)).toISOString(),
      lastError: 'dns_error',
      attemptedAt: now.toISOString(),
      httpStatus: null,
      errorClass: 'dns_error',
    }
  }

  /**
   * The exact bytes sent: the payload fixed at creation, in the documented key order (jsonb keeps its own), so every
   * retry sends the same bytes; a test receipt adds the code derived from the secret.
   */
  function bodyOf(r: ReceiptRow, route: RouteRow, secret: string): string {
    const p = r.payload as Record<string, unknown>
    const amount = (m: unknown) => {
      const { amount, currency } = m as { amount: string; currency: string }
      return { amount, currency }
    }
    if (r.kind === 'test') {
      return JSON.stringify({
        receiptId: p.receiptId,
        kind: p.kind,
        occurredAt: p.occurredAt,
        confirmationCode: confirmationCodeFor(secret, route.version),
      })
    }
    return JSON.stringify({
      receiptId: p.receiptId,
      kind: p.kind,
      externalPaymentRequestId: p.externalPaymentRequestId,
      providerPaymentId: p.providerPaymentId,
      occurredAt: p.occurredAt,
      amount: amount(p.amount),
      allocations: (p.allocations as { externalReceivableId: string; amount: unknown }[]).map((a) => ({
        externalReceivableId: a.externalReceivableId,
        amount: amount(a.amount),
      })),
      unappliedAmount: amount(p.unappliedAmount),
    })
  }

  async function runOnce(): Promise<boolean> {
    await derive()
    if (stopping) return false
    const clients = await dueClients(store, isoNow(clock), isoNow(real), 10_000)
    const attempts = await serveInLanes(clients, concurrency, serveClient, { stopping: () => stopping, onError: opts.onError })
    return attempts > 0
  }

  return createWorker({
    name: 'receipt-dispatcher',
    intervalMs: opts.intervalMs,
    runOnce,
    // A backlog (a Source that was down, a route verified before a busy day) drains run after run: each run sends
    // at most `perRun` receipts per client over at most `perClient` connections, so a Source never has more than
    // that in flight; with nothing sent, the next run waits for intervalMs or a wake-up (bench/receipts.ts).
    repeatWhileWorking: true,
    minWakeGapMs: opts.wakeGapMs ?? 1000,
    onStarting: () => {
      stopping = false
    },
    // The run in progress finishes the clients it is serving (every attempt has its timeout) and records them.
    onStopping: () => {
      stopping = true
    },
    afterStop: async () => {
      await Promise.all([...agents.values()].map((a) => a.close().catch(() => {})))
      agents.clear()
    },
    onError: (err) => opts.onError?.(err),
  })
}
