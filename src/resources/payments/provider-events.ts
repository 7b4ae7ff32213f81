import { EXTERNAL_ID_PATTERN } from '../../domain/identifiers.ts'
import { type Clock, isoNow } from '../../domain/time.ts'
import type { Store } from '../../store/store.ts'
import { inUnitOfWork, type UnitOfWork } from '../unit-of-work.ts'
import {
  findRequestOfProviderPayment,
  lockCheckoutBySession,
  providerEventHandled,
  recordProviderEvent,
  recordProviderReversal,
  setCheckoutStatus,
} from './checkout-store.ts'
import type { ProviderRefunds, ProviderRequests } from './ports.ts'
import { type PaymentProvider, type ProviderEvent, type ProviderFact, ProviderSignatureError } from './provider.ts'
import type { ProviderRegistry } from './registry.ts'
import type { reinstateFromProvider } from './reinstatement.ts'

/**
 * A real provider's events (docs/design/payment-providers.md; docs/decisions.md, "Money the provider moved"), at
 * `POST /providers/{provider}/webhooks/{clientCode}` (provider-webhook-route.ts), and the same handling for every
 * event the catch-up sweep reads from the provider's event list (`handle`). Whatever the provider, in this order:
 *
 * 1. The client's configuration: none, another provider's, or an unknown client: 404. One this instance cannot open
 *    (a stored secret no key of its ring opens): 503 with Retry-After, logged, never "not configured".
 * 2. The delivery verified with the client's webhook secret (the provider's `readEvent`): a missing, wrong or stale
 *    signature is 400, logged at warn (someone may be probing), and nothing is recorded.
 * 3. A validly signed event the service cannot use (a type it does not act on, an event without an object, a body
 *    that is not an event): 200 `{received: true, ignored: "<why>"}`, not recorded. Sending it again changes nothing,
 *    so the route never answers 5xx for what the sender sent.
 * 4. An event id already handled: 200, nothing done (a cheap read first; the insert below is what guarantees it).
 * 5. The object's current state, read from the provider (`factOf`): events arrive twice, late and out of order, so
 *    what the event's copy says is never acted on. A provider that does not answer: 503, and the provider retries.
 * 6. One transaction: the event id recorded (provider_events, unique per client and event: a second delivery, the
 *    sweep and the route at once, or two instances, wait for the first's commit and then do nothing), and its effect:
 *    - paid: the Payment confirmed through the one confirmation rule (payment-requests/payment-rules.ts
 *      recordOutcome, through `ProviderRequests.recordPaid`); the attempt complete;
 *    - processing / failed / expired: the attempt's status; the request stays open (failed, expired: for another try);
 *    - refund: the service's refund decided (refunds/rules.ts recordRefundOutcome, through `ProviderRefunds`), once;
 *    - provider_refund: a refund made at the provider (its Dashboard) recorded as a refund with origin `provider`,
 *      `refund.created`, then decided succeeded (money taken back, receipt, `refund.succeeded`), once per refund id;
 *    - reversal (a dispute lost or its funds withdrawn): recorded once per dispute, then taken back;
 *    - reinstatement (a dispute won after its funds were withdrawn): its reversal undone once (payments/reinstatement.ts).
 * 7. Money taken that the request cannot take (expired or canceled meanwhile, paid through another session, or paid
 *    in another amount or currency than the request's): given back in full through the provider (idempotent per
 *    payment), then the event recorded as `returned`. No Payment is recorded for it; answered 200.
 */
export interface ProviderEventsDeps {
  store: Store
  /** The client's clock (sandbox clocks): decisions are recorded at it. */
  clock: Clock
  /** The base clock: when an event was received. */
  realClock: Clock
  registry: Pick<ProviderRegistry, 'forClient'>
  /** The request's side of a fact (payment-requests/provider-side.ts) and the refunds' (refunds/provider-side.ts). */
  requests: Pick<ProviderRequests, 'lock' | 'recordPaid' | 'recordReversal'>
  refunds: ProviderRefunds
  /** A dispute won after its funds were withdrawn (payments/reinstatement.ts). */
  reinstate: typeof reinstateFromProvider
  atClientTime: <T>(clientCode: string, fn: () => Promise<T>) => Promise<T>
  onFeedAppended?: () => void
  /** A confirmation queued the refund of unapplied money: the refund worker asks soon. */
  onRefundQueued?: () => void
  /** One line per forged delivery (warn) and per configuration this instance cannot open. No secret, no body. */
  log?: { warn(fields: Record<string, unknown>, message: string): void }
}

export interface ProviderEventAnswer {
  status: 200 | 400 | 404 | 503
  body: { received: boolean; eventId?: string; effect?: string; ignored?: string; message?: string }
  headers?: Record<string, string>
}

/** What handling one event did: `effect` when it was recorded (or already was), `ignored` when there was nothing to do. */
export type HandledEvent = { effect: string; applied: boolean } | { ignored: string }

/** Effects that changed nothing here (the event was recorded, or already was, and nothing moved). */
const UNCHANGED: ReadonlySet<string> = new Set([
  'duplicate',
  'not_found',
  'unchanged',
  'already_confirmed',
  'refund_already_decided',
  'refund_already_recorded',
  'reversal_already_recorded',
  'nothing_to_refund',
  'nothing_to_reverse',
  'reinstatement_already_recorded',
  'nothing_to_reinstate',
])

/** Money the request cannot take: the transaction is rolled back, the money given back, then the event recorded. */
class ReturnMoney extends Error {}

/** Seconds a sender waits before sending again when this instance cannot open the client's configuration. */
export const PROVIDER_UNAVAILABLE_RETRY_SECONDS = 30

/**
 * Money the provider took, recorded as the request's Payment; money the request cannot take throws ReturnMoney (the
 * transaction rolls back, giveBack returns it, then the event is recorded).
 */
async function paid(
  deps: ProviderEventsDeps,
  uow: UnitOfWork,
  name: string,
  clientCode: string,
  fact: Extract<ProviderFact, { kind: 'paid' }>,
  after: (() => void)[],
) {
  const now = isoNow(deps.clock)
  const recorded = await deps.requests.recordPaid(uow, name, clientCode, fact, now)
  if (!recorded.taken) throw new ReturnMoney()
  // After the request's lock (recordPaid took it): the order every writer of an attempt keeps.
  const checkout = await lockCheckoutBySession(uow.tx, clientCode, name, fact.sessionId)
  if (checkout)
    await setCheckoutStatus(uow.tx, clientCode, { requestId: fact.requestId, attempt: checkout.attempt, status: 'complete', now })
  if (recorded.created && recorded.unappliedMinor > 0n && deps.onRefundQueued) after.push(deps.onRefundQueued)
  return recorded.created ? 'confirmed' : 'already_confirmed'
}

/** A refund made at the provider: recorded as a refund of its Payment (origin provider), succeeded, once. */
async function providerRefund(
  deps: ProviderEventsDeps,
  uow: UnitOfWork,
  name: string,
  clientCode: string,
  fact: Extract<ProviderFact, { kind: 'provider_refund' }>,
) {
  const requestId = await findRequestOfProviderPayment(uow.tx, clientCode, name, fact.providerPaymentId)
  if (!requestId) return 'not_found'
  return deps.refunds.recordProviderRefund(uow, name, clientCode, requestId, fact, isoNow(deps.clock))
}

async function reversal(
  deps: ProviderEventsDeps,
  uow: UnitOfWork,
  name: string,
  clientCode: string,
  fact: Extract<ProviderFact, { kind: 'reversal' }>,
) {
  const { tx } = uow
  const now = isoNow(deps.clock)
  const requestId = await findRequestOfProviderPayment(tx, clientCode, name, fact.providerPaymentId)
  if (!requestId) return 'not_found'
  const payment = await deps.refunds.lockRemaining(uow, clientCode, requestId)
  if (!payment) return 'not_found'
  // Never more than remains of the Payment after its refunds and reversals (bigint: no Math.min).
  let amountMinor = payment.remainingMinor
  if (fact.amountMinor < amountMinor) amountMinor = fact.amountMinor
  const first = await recordProviderReversal(tx, clientCode, { provider: name, reversalId: fact.reversalId, requestId, amountMinor, now })
  if (!first) return 'reversal_already_recorded'
  if (amountMinor <= 0n) return 'nothing_to_reverse'
  await deps.requests.recordReversal(uow, clientCode, requestId, { amountMinor, currency: fact.currency }, now)
  return 'reversed'
}

/** The event recorded once, and its fact's effect: the answer's `effect`. */
async function apply(
  deps: ProviderEventsDeps,
  uow: UnitOfWork,
  name: string,
  clientCode: string,
  event: ProviderEvent,
  fact: ProviderFact,
  after: (() => void)[],
) {
  const { tx } = uow
  const now = isoNow(deps.clock)
  const recorded = await recordProviderEvent(tx, clientCode, {
    provider: name,
    eventId: event.id,
    type: event.type,
    effect: fact.kind,
    now: deps.realClock.now().toISOString(),
  })
  if (!recorded) return 'duplicate'
  switch (fact.kind) {
    case 'paid':
      return paid(deps, uow, name, clientCode, fact, after)
    case 'processing':
    case 'failed':
    case 'expired': {
      if (!(await deps.requests.lock(uow, clientCode, fact.requestId))) return 'not_found'
      const checkout = await lockCheckoutBySession(tx, clientCode, name, fact.sessionId)
      if (!checkout || checkout.status === 'complete' || checkout.status === 'refunded') return 'unchanged'
      await setCheckoutStatus(tx, clientCode, { requestId: fact.requestId, attempt: checkout.attempt, status: fact.kind, now })
      return fact.kind
    }
    case 'refund': {
      const decided = await deps.refunds.recordDecision(
        uow,
        { clientCode, requestId: fact.requestId, refundId: fact.refundId },
        {
          providerRefundId: fact.providerRefundId,
          status: fact.status,
          ...(fact.failureReason ? { failureReason: fact.failureReason } : {}),
        },
        now,
      )
      return decided ? `refund_${fact.status}` : 'refund_already_decided'
    }
    case 'provider_refund':
      return providerRefund(deps, uow, name, clientCode, fact)
    case 'reversal':
      return reversal(deps, uow, name, clientCode, fact)
    case 'reinstatement':
      // Money given back that the Payment cannot hold is refunded at once, as a confirmation's unapplied money is.
      return deps.reinstate(uow, name, clientCode, fact, now, {
        recordWithheld: deps.refunds.recordWithheldRefunds,
        queueUnapplied: async (u, client, r) => {
          await deps.refunds.queueUnappliedRefund(u, client, r)
          if (deps.onRefundQueued) after.push(deps.onRefundQueued)
        },
      })
    case 'none':
      return `ignored: ${fact.why}`
  }
}

export function createProviderEvents(deps: ProviderEventsDeps) {
  const { store, clock, realClock } = deps

  async function giveBack(
    provider: PaymentProvider,
    clientCode: string,
    event: ProviderEvent,
    fact: Extract<ProviderFact, { kind: 'paid' }>,
  ) {
    const { name } = provider
    await provider.returnPayment(fact, clientCode)
    return deps.atClientTime(clientCode, () =>
      inUnitOfWork(store, async (uow) => {
        const recorded = await recordProviderEvent(uow.tx, clientCode, {
          provider: name,
          eventId: event.id,
          type: event.type,
          effect: 'returned',
          now: realClock.now().toISOString(),
        })
        if (!recorded) return 'duplicate'
        const checkout = await lockCheckoutBySession(uow.tx, clientCode, name, fact.sessionId)
        if (checkout && checkout.status !== 'complete') {
          await setCheckoutStatus(uow.tx, clientCode, {
            requestId: fact.requestId,
            attempt: checkout.attempt,
            status: 'refunded',
            now: isoNow(clock),
          })
        }
        return 'returned'
      }),
    )
  }

  /**
   * One verified event of the client's provider, whether the route received it or the sweep read it: its object read
   * from the provider, then recorded once with its effect. Throws only when the provider or the store failed.
   */
  async function handle(provider: PaymentProvider, clientCode: string, event: ProviderEvent): Promise<HandledEvent> {
    if (event.ignored !== null) return { ignored: event.ignored }
    if (await providerEventHandled(store, clientCode, provider.name, event.id)) return { effect: 'duplicate', applied: false }
    return applyFact(provider, clientCode, event, await provider.factOf(event))
  }

  async function applyFact(provider: PaymentProvider, clientCode: string, event: ProviderEvent, fact: ProviderFact): Promise<HandledEvent> {
    const after: (() => void)[] = []
    let effect: string
    try {
      effect = await deps.atClientTime(clientCode, () =>
        inUnitOfWork(
          store,
          (uow) => {
            // The provider's word (the timeline's actor, migration 0038).
            uow.actor = { type: 'provider', ref: provider.name }
            return apply(deps, uow, provider.name, clientCode, event, fact, after)
          },
          deps.onFeedAppended,
        ),
      )
    } catch (err) {
      if (!(err instanceof ReturnMoney) || fact.kind !== 'paid') throw err
      effect = await giveBack(provider, clientCode, event, fact)
    }
    for (const wake of after) wake()
    if (effect.startsWith('ignored: ')) return { ignored: effect.slice('ignored: '.length) }
    return { effect, applied: !UNCHANGED.has(effect) }
  }

  /**
   * A checkout attempt read back from the provider (the page, the sweep): settled from what it says now, exactly as
   * its event would have. Recorded once per session and state (`read-back/<session>/<state>`); the event, when it
   * comes, finds the Payment already recorded. A session still open records nothing.
   */
  async function readBack(provider: PaymentProvider, clientCode: string, sessionId: string): Promise<HandledEvent> {
    const fact = await provider.readCheckout(sessionId)
    if (fact.kind === 'none') return { ignored: fact.why }
    const event: ProviderEvent = { id: `read-back/${sessionId}/${fact.kind}`, type: 'read_back', objectId: sessionId, ignored: null }
    if (await providerEventHandled(store, clientCode, provider.name, event.id)) return { effect: 'duplicate', applied: false }
    return applyFact(provider, clientCode, event, fact)
  }

  return {
    handle,
    readBack,

    async receive(
      providerName: string,
      clientCode: string,
      rawBody: Buffer,
      headers: Record<string, string | string[] | undefined>,
    ): Promise<ProviderEventAnswer> {
      // A client code no client can have (NUL, broken UTF-8, other characters, too long) names no configuration:
      // answered before any statement, which such text could otherwise fail.
      const choice = EXTERNAL_ID_PATTERN.test(clientCode) ? await deps.registry.forClient(store, clientCode, { forEvents: true }) : null
      if (choice?.kind === 'unconfigured' && choice.reason === 'secret_unreadable') {
        deps.log?.warn(
          { clientCode, provider: providerName },
          "payment provider event refused for now: this instance holds no key that opens the client's stored provider secrets (set WEBHOOK_SECRET_KEY_PREVIOUS; docs/operations.md)",
        )
        return {
          status: 503,
          headers: { 'retry-after': String(PROVIDER_UNAVAILABLE_RETRY_SECONDS) },
          body: {
            received: false,
            message: "The client's payment provider cannot be reached from this instance now; send it again later.",
          },
        }
      }
      if (choice?.kind !== 'configured' || choice.config.provider.name !== providerName) {
        return { status: 404, body: { received: false, message: 'No such payment provider configuration for this client.' } }
      }
      const provider = choice.config.provider
      let event: ProviderEvent
      try {
        event = provider.readEvent(rawBody, headers)
      } catch (err) {
        if (err instanceof ProviderSignatureError) {
          // Someone may be probing: a warning, with who it claimed to be for and no body.
          deps.log?.warn({ clientCode, provider: providerName }, 'payment provider event with a bad signature refused')
          return { status: 400, body: { received: false, message: 'The signature does not verify.' } }
        }
        throw err
      }
      const handled = await handle(provider, clientCode, event)
      const eventId = event.id === '' ? {} : { eventId: event.id }
      if ('ignored' in handled) return { status: 200, body: { received: true, ...eventId, ignored: handled.ignored } }
      return { status: 200, body: { received: true, ...eventId, effect: handled.effect } }
    },
  }
}

export type ProviderEvents = ReturnType<typeof createProviderEvents>
