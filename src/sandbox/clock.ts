import { AsyncLocalStorage } from 'node:async_hooks'
import type { Clock } from '../domain/time.ts'
import type { Queryable } from '../store/store.ts'
import { listClocks, readClock } from './store.ts'

/**
 * The sandbox's per-client time (docs/decisions.md, "Sandbox clock").
 *
 * Every service takes an injected `Clock` at construction and reads it where a time rule applies. In sandbox,
 * createApp (src/app.ts) injects `clock` below instead of the base clock: its `now()` is the stopped instant of
 * the client the current work is for, or the base clock's time when that client runs on real time or when no
 * client's work is in progress. The client's instant is read from the database (table sandbox_clocks) once when
 * a scope is entered, then held for the scope: every instance sharing the database agrees on it.
 *
 * Where a scope is entered (the complete list; nothing else reads a client's clock):
 * - HTTP: once per request to a route with a `{clientCode}` path parameter, around the handler
 *   (src/http/server.ts, `HttpDeps.atClientTime`), for the v1 API and the operator routes alike.
 * - The hosted payment page (`/pay/{token}`): its GET reads the client's stopped instant inside its one statement
 *   (payment-requests/store.ts, the page read joins sandbox_clocks); its POST enters the scope once the token
 *   names the client (payment-requests/service.ts).
 * - Workers, per client they process: the freshness sweep (freshness/service.ts `atClientTime`), the payment
 *   request expiry sweep (resources/payment-requests/expiry.ts), change-feed and delivery retention
 *   (resources/retention/service.ts), the webhook dispatcher (workers/webhook-dispatcher.ts) per endpoint.
 * - The clock's own routes, which apply the time rules at the new time (service.ts, applyTimeRules).
 * Batch leases, rate-limit windows and webhook delivery leases stay on the base clock: they coordinate processes,
 * they are not rules of the client's data. In production no scope is ever entered and services get the base
 * clock itself, so a request costs nothing more.
 */
export interface SandboxClock {
  /** The clock to inject into services. */
  readonly clock: Clock
  /** The real (base) clock: leases, webhook signature timestamps. */
  readonly base: Clock
  /** Runs `fn` at the client's time, read from `db` (one primary-key lookup). */
  atClientTime<T>(db: Queryable, clientCode: string, fn: () => Promise<T>): Promise<T>
  /** Runs `fn` at a known instant (null: the base clock's time), for workers that read every clock at once. */
  atInstant<T>(at: Date | null, fn: () => T): T
  /** Every stopped clock, by client code. */
  clocks(db: Queryable): Promise<Map<string, Date>>
}

export function createSandboxClock(base: Clock): SandboxClock {
  const scope = new AsyncLocalStorage<{ at: Date | null }>()
  return {
    clock: {
      now() {
        const at = scope.getStore()?.at
        return at ? new Date(at.getTime()) : base.now()
      },
    },
    base,
    async atClientTime(db, clientCode, fn) {
      const at = await readClock(db, clientCode)
      return scope.run({ at }, fn)
    },
    atInstant(at, fn) {
      return scope.run({ at }, fn)
    },
    clocks: listClocks,
  }
}
