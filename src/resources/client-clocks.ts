import type { Clock } from '../domain/time.ts'
import type { Queryable } from '../store/store.ts'

/**
 * Every client's time at once, for a rule a worker applies to all clients (payment expiry, retention): the sandbox
 * clock (src/sandbox/clock.ts) is one, absent in production. Declared here, below the families, so that a family's
 * rule can run at each client's time without knowing the sandbox that sits above it.
 */
export interface ClientClocks {
  /** The clock services read: a client's stopped instant inside `atInstant`, the base clock's time otherwise. */
  readonly clock: Clock
  /** Real time. */
  readonly base: Clock
  /** Runs `fn` at a known instant (null: the base clock's time). */
  atInstant<T>(at: Date | null, fn: () => T): T
  /** Every stopped clock, by client code. */
  clocks(db: Queryable): Promise<Map<string, Date>>
}
