import { Problem } from '../../domain/problems.ts'
import type { Clock } from '../../domain/time.ts'
import type { Store } from '../../store/store.ts'
import { inUnitOfWork, type UnitOfWork } from '../unit-of-work.ts'
import { type CheckoutRow, insertCheckout, lockLatestCheckout, openCheckout, setCheckoutStatus } from './checkout-store.ts'
import type { ProviderRequests } from './ports.ts'
import type { PaymentProvider, SessionLifetime } from './provider.ts'
import type { ProviderRegistry } from './registry.ts'

/**
 * Paying through a client's real provider from the hosted page (issue 22 item 2; docs/design/payment-providers.md): the page's
 * POST runs the pay-time check, then starts (or resumes) a checkout attempt and sends the debtor to the provider's
 * page (303). The provider's event records the outcome later (provider-events.ts). Whatever the provider: its
 * session lifetimes are its own (`sessionLifetime`), and the request's side is asked through `ProviderRequests`.
 *
 * One transaction, under the request's row lock (so two clicks run one after the other):
 * 1. the request as it is now (an expiry due is recorded first); a request no longer open answers as the page does
 *    (decided: back to the page; expired, canceled: refused);
 * 2. the request's latest attempt: `processing` or `complete` (money under way or taken) sends the debtor back to the
 *    page, which says so, and starts nothing;
 * 3. the pay-time check, as every confirmation runs it (payment-requests/payment-rules.ts): a hold refuses (409 recovery_held), an
 *    amount that no longer fits the working amount less the open requests made before it cancels the request
 *    (`balance_changed`), which commits, and nothing is charged;
 * 4. the attempt: the latest one still `open` with time left sends the debtor to the same session; one `creating`
 *    (the provider was asked and its answer not recorded: a crash, a timeout, a second click in flight) made less
 *    than CREATING_REUSE_MS ago is asked again under the same idempotency key, and so gives the same session; any
 *    other (none yet, expired, failed, returned) starts attempt n + 1, recorded `creating` with its session expiry.
 *
 * Then, outside the transaction, the provider is asked for the session (key `checkout/{client}/{request}/{n}`),
 * and the attempt becomes `open` with its url. Two clicks never make two sessions for one attempt: the second waits
 * for the first's commit, then finds the attempt `creating` (same key) or `open` (same url).
 *
 * The session's expiry: the request's own, at most the provider's longest session, measured on the base clock (the
 * provider's time) from the time the request has left on its client's clock. An attempt is not started when the
 * request has less than `minTimeLeftMs` left (the provider's shortest session, and the CREATING_REUSE_MS during
 * which the attempt's parameters must stay identical): the page says it expires too soon to pay online
 * (docs/decisions.md, "Taking real payments"). So a session always ends before its request.
 */
export const CREATING_REUSE_MS = 5 * 60_000

/** Less time left than this on a request, no attempt is started at a provider with these session lifetimes. */
export const minTimeLeftMs = (lifetime: SessionLifetime) => lifetime.minSeconds * 1000 + CREATING_REUSE_MS
/** An open session this close to its expiry is not offered again: a new attempt starts. */
const OPEN_SESSION_MARGIN_MS = 60_000

export type CheckoutAnswer = { redirect: string } | { refusal: string }

/** What paying needs of the page's row (payment-requests/store.ts PageRow). */
export interface RequestOnPage {
  client_code: string
  external_payment_request_id: string
  amount_minor: string
  currency: string
  description: string | null
  creditor_name: string
}

export interface CheckoutDeps {
  store: Store
  /** The client's clock (sandbox clocks): the request's expiry is judged on it. */
  clock: Clock
  /** The base clock: the provider's time (session expiry, attempt age). */
  realClock: Clock
  registry: Pick<ProviderRegistry, 'forClient' | 'kinds'>
  publicBaseUrl: string
  requests: Pick<ProviderRequests, 'lockToPay'>
  atClientTime: <T>(clientCode: string, fn: () => Promise<T>) => Promise<T>
  onFeedAppended?: () => void
  /** One line when this instance cannot open the client's provider secrets. */
  log?: { warn(fields: Record<string, unknown>, message: string): void }
}

type Planned = { kind: 'page' } | { kind: 'redirect'; url: string } | { kind: 'ask'; attempt: number; expiresAt: string }

export const EXPIRES_TOO_SOON =
  'Your payment was not started: this payment request expires too soon to pay online. Nothing has been charged.'

export function createCheckout(deps: CheckoutDeps) {
  const { store, clock, realClock, registry, publicBaseUrl } = deps

  async function plan(uow: UnitOfWork, row: RequestOnPage, provider: PaymentProvider): Promise<Planned> {
    const { tx } = uow
    const clientCode = row.client_code
    const id = row.external_payment_request_id
    const nowMs = clock.now().getTime()
    // Confirmed: back to the page, which shows it; expired, canceled or failed: refused, as the page's form is.
    const request = await deps.requests.lockToPay(uow, clientCode, id, new Date(nowMs).toISOString(), nowMs)
    if (!request) return { kind: 'page' }
    const latest = await lockLatestCheckout(tx, clientCode, id)
    if (latest?.status === 'processing' || latest?.status === 'complete') return { kind: 'page' }
    // The pay-time check, as every confirmation makes it: false when it canceled the request.
    if (!(await request.payTimeCheck())) return { kind: 'page' }
    const realNowMs = realClock.now().getTime()
    const reusable = reuse(latest, realNowMs)
    if (reusable) return reusable
    if (latest && (latest.status === 'open' || latest.status === 'creating')) {
      await setCheckoutStatus(tx, clientCode, {
        requestId: id,
        attempt: latest.attempt,
        status: 'expired',
        now: new Date(realNowMs).toISOString(),
      })
    }
    const leftMs = Date.parse(request.expiresAt) - nowMs
    if (leftMs < minTimeLeftMs(provider.sessionLifetime)) throw new TooLate()
    const expiresAt = new Date(realNowMs + Math.min(leftMs, provider.sessionLifetime.maxSeconds * 1000)).toISOString()
    const attempt = (latest?.attempt ?? 0) + 1
    await insertCheckout(tx, clientCode, {
      requestId: id,
      attempt,
      provider: provider.name,
      expiresAt,
      now: new Date(realNowMs).toISOString(),
    })
    return { kind: 'ask', attempt, expiresAt }
  }

  function reuse(latest: CheckoutRow | undefined, realNowMs: number): Planned | null {
    if (latest?.status === 'open' && latest.url !== null && Date.parse(latest.expires_at) - realNowMs > OPEN_SESSION_MARGIN_MS) {
      return { kind: 'redirect', url: latest.url }
    }
    if (latest?.status === 'creating' && realNowMs - Date.parse(latest.created_at) < CREATING_REUSE_MS) {
      return { kind: 'ask', attempt: latest.attempt, expiresAt: latest.expires_at }
    }
    return null
  }

  const leastTimeLeft = new Map(registry.kinds.map((k) => [k.name, minTimeLeftMs(k.sessionLifetime)]))

  return {
    /** Less time left than this on a request paid through the provider named so, the page offers no payment. */
    minTimeLeftMs(providerName: string): number {
      return leastTimeLeft.get(providerName) ?? 0
    },

    /**
     * The page's Pay for a client with a real provider. Throws the page's refusals (recovery_held,
     * payment_request_state_conflict, route_not_found when the client's configuration cannot be used).
     */
    async pay(token: string, row: RequestOnPage): Promise<CheckoutAnswer> {
      const clientCode = row.client_code
      const page = `${publicBaseUrl}/pay/${token}`
      const choice = await registry.forClient(store, clientCode)
      if (choice.kind === 'unconfigured' && choice.reason === 'secret_unreadable') {
        // Another instance's key (a rotation not rolled out here yet): retry, never "no provider", never the sandbox.
        deps.log?.warn(
          { clientCode },
          "payment refused for now: this instance holds no key that opens the client's stored provider secrets (set WEBHOOK_SECRET_KEY_PREVIOUS; docs/operations.md)",
        )
        throw new Problem(
          'payment_provider_unavailable',
          'The payment provider cannot be reached right now. Nothing was charged; try again in a minute.',
          {
            headers: { 'retry-after': '30' },
          },
        )
      }
      if (choice.kind !== 'configured') throw new Problem('route_not_found', 'No payment provider is configured for this client.')
      const provider = choice.config.provider
      let planned: Planned
      try {
        planned = await deps.atClientTime(clientCode, () => inUnitOfWork(store, (uow) => plan(uow, row, provider), deps.onFeedAppended))
      } catch (err) {
        if (err instanceof TooLate) return { refusal: EXPIRES_TOO_SOON }
        throw err
      }
      // Back to the page, as the sandbox form's post/redirect/get does (relative: the page's own origin).
      if (planned.kind === 'page') return { redirect: `/pay/${token}` }
      if (planned.kind === 'redirect') return { redirect: planned.url }
      const id = row.external_payment_request_id
      const session = await provider.startCheckout({
        clientCode,
        externalPaymentRequestId: id,
        attempt: planned.attempt,
        amountMinor: BigInt(row.amount_minor),
        currency: row.currency,
        description: row.description ?? `Payment to ${row.creditor_name}`,
        // The page knows the debtor is back from this session (processing).
        returnUrl: (sessionId) => `${page}?checkout=${sessionId}`,
        cancelUrl: page,
        expiresAt: new Date(planned.expiresAt),
        idempotencyKey: `checkout/${clientCode}/${id}/${planned.attempt}`,
      })
      await openCheckout(store, clientCode, {
        requestId: id,
        attempt: planned.attempt,
        sessionId: session.sessionId,
        url: session.url,
        expiresAt: session.expiresAt,
        now: realClock.now().toISOString(),
      })
      return { redirect: session.url }
    },
  }
}

class TooLate extends Error {}

export type Checkout = ReturnType<typeof createCheckout>
