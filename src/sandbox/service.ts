import { findClient } from '../admin/store.ts'
import { fieldProblem, Problem } from '../domain/problems.ts'
import { isoNow } from '../domain/time.ts'
import { recordAudit } from '../resources/audit/store.ts'
import type { Freshness } from '../resources/freshness/service.ts'
import { allSourceActivity } from '../resources/holds/source-activity-store.ts'
import { sweepExpiredPaymentRequests } from '../resources/payment-requests/expiry.ts'
import { retainClient } from '../resources/retention/service.ts'
import { inUnitOfWork } from '../resources/unit-of-work.ts'
import type { Queryable, Store } from '../store/store.ts'
import type { SandboxClock } from './clock.ts'
import { durationMs, type SandboxClockAdvance, type SandboxClockView } from './schema.ts'
import { deleteClock, findClock, writeClock } from './store.ts'

/** The latest instant a clock may show: timestamps are written with four-digit years. */
const LATEST_MS = Date.parse('9999-12-31T23:59:59.999Z')

export interface SandboxClockServiceDeps {
  store: Store
  sandbox: SandboxClock
  freshness: Pick<Freshness, 'sweepClient'>
  /**
   * Brings every Receivable of the client to its last client fact (new revisions and `receivable.updated`
   * events), as the background fan-out would: a freshness flip caused by the clock shows before the answer.
   */
  drainClientFacts?: (clientCode: string) => Promise<unknown>
}

/**
 * The operator's sandbox clock (docs/decisions.md, "Sandbox clock"): read it, advance it (by a duration or to
 * an instant, never back), reset it to real time. Each move is one transaction (the client row locked, so moves
 * of one client are serialized across instances), audited; then the client's time rules are applied at the
 * new time before the answer: freshness (`source_stale` with new Receivable revisions and feed events), Payment
 * request expiry (with `payment_request.expired` events), change-feed and webhook delivery retention. Webhook
 * retries that became due are sent by the dispatcher's next run. Should applying fail after the move committed,
 * the periodic sweeps (which read the same clock) apply them.
 */
export function createSandboxClockService({ store, sandbox, freshness, drainClientFacts }: SandboxClockServiceDeps) {
  const { base } = sandbox

  async function lockClient(tx: Queryable, clientCode: string) {
    if (!(await findClient(tx, clientCode, true))) throw new Problem('client_not_found', `No client ${clientCode}.`)
  }

  async function view(clientCode: string): Promise<SandboxClockView> {
    const row = await findClock(store, clientCode)
    if (!row) return { clientCode, mode: 'real_time', now: isoNow(base), updatedAt: null }
    return { clientCode, mode: 'frozen', now: row.frozen_at, updatedAt: row.updated_at }
  }

  /** Applies every time rule of the client at its time now (the clock just moved). */
  function applyTimeRules(clientCode: string) {
    return sandbox.atClientTime(store, clientCode, async () => {
      const sourceFlipped = await freshness.sweepClient(store, clientCode)
      if (drainClientFacts) await drainClientFacts(clientCode)
      const paymentRequestsExpired = await sweepExpiredPaymentRequests(store, sandbox.clock, { clientCode })
      await retainClient(store, clientCode, isoNow(sandbox.clock))
      return { sourceFlipped, paymentRequestsExpired }
    })
  }

  return {
    applyTimeRules,

    async get(clientCode: string): Promise<SandboxClockView> {
      if (!(await findClient(store, clientCode))) throw new Problem('client_not_found', `No client ${clientCode}.`)
      return view(clientCode)
    },

    async advance(clientCode: string, body: SandboxClockAdvance): Promise<SandboxClockView> {
      if ((body.by === undefined) === (body.to === undefined)) {
        throw fieldProblem(body.by === undefined ? '' : '/to', 'custom', 'give exactly one of `by` (a duration) or `to` (an instant)')
      }
      await inUnitOfWork(store, async ({ tx }) => {
        await lockClient(tx, clientCode)
        const realNow = isoNow(base)
        const frozen = await findClock(tx, clientCode, true)
        const fromMs = frozen ? Date.parse(frozen.frozen_at) : Date.parse(realNow)
        const from = new Date(fromMs).toISOString()
        let toMs: number
        if (body.by !== undefined) {
          toMs = fromMs + durationMs(body.by)
          if (toMs > LATEST_MS) throw fieldProblem('/by', 'too_big', 'would move the clock past 9999-12-31T23:59:59.999Z')
        } else {
          toMs = Date.parse(body.to as string)
          if (toMs < fromMs) {
            throw new Problem(
              'sandbox_clock_backwards',
              `The clock of client ${clientCode} shows ${from}; it cannot go back to ${new Date(toMs).toISOString()}. Advance to ${from} or later, or reset it to real time.`,
              { extensions: { now: from } },
            )
          }
        }
        const to = new Date(toMs).toISOString()
        await writeClock(tx, clientCode, to, realNow)
        await recordAudit(tx, {
          action: 'sandbox_clock.advanced',
          clientCode,
          targetType: 'sandbox_clock',
          targetId: clientCode,
          details: { from, to, ...(body.by !== undefined ? { by: body.by } : {}) },
          change: { from, to },
          occurredAt: realNow,
        })
      })
      await applyTimeRules(clientCode)
      return view(clientCode)
    },

    /** Back to real time (idempotent; audited when the clock was stopped). Recorded times stay as they are. */
    async reset(clientCode: string): Promise<SandboxClockView> {
      await inUnitOfWork(store, async ({ tx }) => {
        await lockClient(tx, clientCode)
        const frozen = await findClock(tx, clientCode, true)
        if (!frozen) return
        await deleteClock(tx, clientCode)
        const realNow = isoNow(base)
        await recordAudit(tx, {
          action: 'sandbox_clock.reset',
          clientCode,
          targetType: 'sandbox_clock',
          targetId: clientCode,
          details: { from: frozen.frozen_at, to: realNow },
          change: { from: frozen.frozen_at, to: null },
          occurredAt: realNow,
        })
      })
      await applyTimeRules(clientCode)
      return view(clientCode)
    },
  }
}

export type SandboxClockService = ReturnType<typeof createSandboxClockService>

/**
 * The periodic freshness sweep in sandbox: the clients on real time at the base clock's time, then each client
 * whose clock is stopped at its own time.
 */
export async function sweepFreshnessAtClientTimes(
  store: Store,
  sandbox: SandboxClock,
  freshness: Pick<Freshness, 'evaluate' | 'sweepClient'>,
): Promise<number> {
  const clocks = await sandbox.clocks(store)
  let flipped = 0
  for (const c of await allSourceActivity(store)) {
    const at = clocks.get(c.client_code) ?? null
    const stale = sandbox.atInstant(at, () => freshness.evaluate(c, c.feed_mode).state === 'stale')
    if (stale === c.stale_recorded) continue
    if (await sandbox.atInstant(at, () => freshness.sweepClient(store, c.client_code))) flipped++
  }
  return flipped
}
