import { sha256Hex } from '../domain/canonical.ts'
import type { KeyRing } from '../domain/key-ring.ts'
import { money } from '../domain/money.ts'
import { type Clock, isoNow } from '../domain/time.ts'
import type { Resolver } from '../outbound/destination.ts'
import {
  type ClaimRoute,
  claimReceipts,
  completeReceiptAttempts,
  dueClients,
  insertReceipts,
  lockRouteForClaim,
  lockRouteToDerive,
  type NewReceipt,
  type ReceiptRow,
  releaseReceipts,
  routesToDerive,
  type ScannedEvent,
  scanFeed,
} from '../resources/receipts/delivery-store.ts'
import {
  disableWithAudit,
  newConfirmationCode,
  openRouteSecret,
  receiptIdFor,
  TEST_RECEIPT_RETRY_MS,
} from '../resources/receipts/service.ts'
import { inUnitOfWork } from '../resources/unit-of-work.ts'
import type { Store } from '../store/store.ts'
import { ATTEMPT_TIMEOUT_MS, type Claimed, createDeliveryEngine, type DeliveryChannel, type DeliveryWorker } from './delivery-engine.ts'

/**
 * The receipt dispatcher (docs/design/receipt-delivery.md), a channel of the delivery engine
 * (delivery-engine.ts: claims, checks, signing, attempts, retries, disabling). Guarantees of its own:
 * - Receipts come from committed facts: each run walks the change feed of every verified route after its scanned
 *   sequence (commit order) and turns each `payment.confirmed`, `refund.succeeded` and `payment.reversed` event
 *   into one receipt row, its payload read from the `payments` row (and the take-back record) and fixed then, its id
 *   stable (`receiptIdFor`), in the same transaction that moves the sequence. Nothing committed is missed, nothing
 *   uncommitted is sent. The sequence starts at the feed head when the route is first configured, so what happens
 *   while it is unverified is delivered once it is verified. While the governing grant says `receiptDeliveryOwner`
 *   `partner` the sequence moves on and nothing is created: the partner delivers those.
 * - Claims per client: the route and the grant of the Integration that configured it are read under the route's
 *   lock in the claim's transaction. Owner `partner`: no receipt is claimed (they wait); a test receipt still goes.
 * - An unverified route is sent its test receipt only (of its current configuration), each attempt with a new
 *   random confirmation code whose digest the claim stores; a verified one, its real receipts only. A test receipt
 *   is retried within seconds (TEST_RECEIPT_RETRY_MS), then on the webhook schedule.
 * - Each attempt: `Service-Signature` (the webhook scheme) under the route's own secret, the same receiptId on
 *   every retry.
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
  /** One line per route whose secret this instance's key ring cannot open. */
  onUnreadableSecret?: (fields: { channel: string; target: string }) => void
  onError?: (err: unknown) => void
}

/** The feed events that can give a receipt: a commit that appends none of them does not wake this channel. */
export const RECEIPT_EVENT_TYPES: readonly string[] = ['payment.confirmed', 'refund.succeeded', 'payment.reversed', 'payment.reinstated']

/** The receipt kind of each event that reports one take-back record (a reinstatement: money given back to the Payment). */
const TAKE_BACK_KINDS: Readonly<Record<string, NewReceipt['kind']>> = {
  'refund.succeeded': 'refund',
  'payment.reversed': 'reversal',
  'payment.reinstated': 'reinstatement',
}

type Item = ReceiptRow & { id: string; roundAttempts: number }
interface ClaimedRoute extends Claimed<Item> {
  route: ClaimRoute
  /** The confirmation code the claimed test receipt carries (its digest is stored); null for real receipts. */
  confirmationCode: string | null
}

export function createReceiptDispatcher(opts: ReceiptDispatcherOptions): DeliveryWorker {
  const { store, clock, retryScheduleMs } = opts
  const real = opts.realClock ?? clock
  const timeoutMs = opts.timeoutMs ?? ATTEMPT_TIMEOUT_MS
  const perClient = opts.perClient ?? 10
  const perRun = opts.perRun ?? 50
  const testSchedule = [...TEST_RECEIPT_RETRY_MS, ...retryScheduleMs]

  /** Every verified route behind its feed head, one transaction each, up to 1,000 feed events each per run. */
  async function derive(stopping: () => boolean): Promise<void> {
    for (const clientCode of await routesToDerive(store, 10_000)) {
      if (stopping()) return
      await inUnitOfWork(store, async ({ tx }) => {
        const r = await lockRouteToDerive(tx, clientCode)
        if (!r) return
        const now = isoNow(clock)
        if (r.grant_status !== 'active') {
          await disableWithAudit(tx, r.client_code, 'grant_revoked', now, r.integration_id)
          return
        }
        const events = await scanFeed(tx, r.client_code, r.scanned_seq, 1000)
        const last = events.at(-1)
        if (!last) return
        // Owner `partner`: the partner delivers what is confirmed meanwhile; the sequence moves on all the same.
        const receipts = r.receipt_delivery_owner === 'service' ? receiptsOf(r.client_code, events) : []
        await insertReceipts(tx, r.client_code, receipts, last.seq, now)
      })
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
      } else if (e.take_back_key !== null && TAKE_BACK_KINDS[e.type] !== undefined) {
        kind = TAKE_BACK_KINDS[e.type] as NewReceipt['kind']
        // The same source keys as before the take-back record existed: a receipt's id never changes.
        sourceKey = kind === 'refund' ? `${requestId}/${e.take_back_key.slice('refund/'.length)}` : `${requestId}/${kind}/${e.revision}`
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

  /**
   * The exact bytes sent: the payload fixed at creation, in the documented key order (jsonb keeps its own), so every
   * retry sends the same bytes; a test receipt adds the confirmation code of this attempt.
   */
  function bodyOf(r: ReceiptRow, confirmationCode: string | null): string {
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
        confirmationCode,
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

  const channel: DeliveryChannel<string, Item, ClaimedRoute> = {
    name: 'receipt-dispatcher',
    userAgent: 'InboundReceivablesService-Receipts/1',
    idHeader: (r) => ['service-receipt-id', r.receipt_id],
    connections: perClient,
    maxAgents: 64,
    // A lease outlives the slowest claim's attempts (perRun over perClient connections, each under the timeout) by a
    // wide margin.
    leaseMs: timeoutMs * (Math.ceil(perRun / perClient) + 3),
    derive,
    due: () => dueClients(store, isoNow(clock), isoNow(real), 10_000),
    async claim(clientCode, lease) {
      return inUnitOfWork(store, async ({ tx }) => {
        const route = await lockRouteForClaim(tx, clientCode)
        if (!route || route.state === 'disabled') return null
        const target = `receipt route ${clientCode}`
        const base = { clientCode, target, url: route.url, route, confirmationCode: null }
        if (route.grant_status !== 'active') return { ...base, grantActive: false, items: [] }
        const tests = route.state === 'unverified'
        // Owner `partner`: no receipt goes out (they wait); a test receipt still proves the route.
        if (!tests && route.receipt_delivery_owner !== 'service') return { ...base, grantActive: true, items: [] }
        const code = tests ? newConfirmationCode() : null
        const rows = await claimReceipts(tx, {
          clientCode,
          testVersion: tests ? route.version : null,
          confirmationDigest: code === null ? null : sha256Hex(code),
          ...lease,
          limit: perRun,
        })
        const items = rows.map((r) => ({ ...r, id: r.receipt_id, roundAttempts: r.round_attempts }))
        return { ...base, grantActive: true, items, confirmationCode: code }
      })
    },
    secrets(ring, { route }) {
      const secret = openRouteSecret(ring, route)
      return secret === null ? null : [secret]
    },
    body: (r, c) => bodyOf(r, r.kind === 'test' ? c.confirmationCode : null),
    schedule: (r) => (r.kind === 'test' ? testSchedule : retryScheduleMs),
    complete: (c, token, outcomes) =>
      completeReceiptAttempts(
        store,
        c.clientCode,
        token,
        outcomes.map(({ id, durationMs: _, ...o }) => ({ receiptId: id, ...o })),
      ),
    release: (c, token, ids) => releaseReceipts(store, c.clientCode, token, ids),
    async disable(c, reason) {
      await inUnitOfWork(store, (uow) => disableWithAudit(uow.tx, c.clientCode, reason, isoNow(clock), c.route.integration_id))
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
      // A backlog (a Source that was down, a route verified before a busy day) drains run after run: each run sends
      // at most `perRun` receipts per client over at most `perClient` connections (bench/receipts.ts).
      repeatWhileWorking: true,
      ...(opts.onUnreadableSecret ? { onUnreadableSecret: opts.onUnreadableSecret } : {}),
      ...(opts.onError ? { onError: opts.onError } : {}),
    },
    channel,
  )
}

export type ReceiptDispatcher = DeliveryWorker
