import { randomUUID } from 'node:crypto'
import ipaddr from 'ipaddr.js'
import { type Caller, type CallerRow, callerFromRow } from '../access/grants.ts'
import { lookupKey } from '../access/store.ts'
import type { Environment } from '../config.ts'
import type { Clock } from '../domain/time.ts'
import {
  type GateCall,
  type GateRow,
  limitsLiveInStore,
  type ReadStatement,
  releaseSlots,
  releaseSlotsNow,
  runGate,
  runGatedRead,
} from '../store/gate-store.ts'
import type { Queryable, Store } from '../store/store.ts'

/**
 * The request gate: an API key, its grant for the Client in the path, the per-minute count and the concurrency
 * slots, decided together, before any work.
 *
 * Rate: fixed one-minute windows aligned to the minute of the service's clock (the injected `Clock`), one counter
 * per bucket and window; every identified request counts, refused ones included. Chosen over a token bucket
 * because "60 requests per minute" then means exactly that for any calendar minute, and over a sliding log
 * because it is one counter per key per minute.
 *
 * Concurrency: a bucket has N slots. A request holds one in every bucket from the gate to the end of its HTTP
 * exchange (src/http/admission.ts gives it back before the response is written, or when the connection ends first).
 *
 * Two implementations, chosen by where the store keeps limits (src/store/gate-store.ts, `limitsLiveInStore`):
 * - PostgreSQL (several instances may share it): the whole gate is one statement, `request_gate` (migration
 *   0012; its SQL in src/store/gate-store.ts), on UNLOGGED tables; a slot is a row whose primary key makes the claim atomic across instances, and
 *   its lease (`leaseSeconds` of the service's clock) frees the slot of a process that died mid-request. A
 *   write frees its slot inside its own transaction (`Lease.releaseIn`, called by executeWrite before COMMIT),
 *   so the slot is free exactly when the write commits; any other request frees it in one statement before its
 *   response is written. A failed release is retried in the background, and should every retry fail the lease
 *   frees the slot.
 * - the embedded store (PGlite), which one process owns (DATA_DIR is locked to it): the key lookup is the one
 *   round trip, the counters and slots live in this process's memory. The key's slot is taken before the
 *   lookup, so a second request of the key is refused even while the first waits for the single PGlite
 *   connection; a process that dies takes its slots with it.
 */
export interface RateResult {
  allowed: boolean
  limit: number
  remaining: number
  resetSeconds: number
}

/** Where a failed release is reported (a pino logger fits); only the error's name, code and message are passed. */
export interface ReleaseLog {
  warn(obj: Record<string, unknown>, msg: string): void
  error(obj: Record<string, unknown>, msg: string): void
}

export interface Lease {
  /**
   * Frees the slots; the first call does it, later calls do nothing. Never rejects: it runs after the request's
   * work is done (often after commit), and nothing there may change the answer. A failed release is reported
   * to the request's `log` and retried in the background after each of `RELEASE_RETRY_DELAYS_MS`; should every
   * retry fail, the lease's expiry frees the slots.
   */
  release(): Promise<void>
  /**
   * For a request that writes in a transaction: frees the slots inside `tx`, so that they are free exactly when
   * the write commits, with no round trip of their own after it. Call the returned `committed` once `tx` has
   * committed: the lease is then released and `release()` does nothing. Should `tx` roll back (or its commit
   * fail), `committed` is never called and `release()` frees the slots as usual. Absent where the slots are
   * not in the store (the embedded store's gate keeps them in memory).
   */
  releaseIn?(tx: Queryable): Promise<() => void>
}

export interface GateRequest {
  /** SHA-256 digest of the presented API key (its shape and environment prefix already checked). */
  digest: string
  environment: Environment
  /** The Client in the path: its grant is looked up, and in sandbox it is a bucket too. */
  clientCode: string
  log?: ReleaseLog
}

/**
 * `caller` null: the key is unknown, revoked, expired or of another environment (401; nothing counted, nothing held).
 * Otherwise `refused` says why no slot is held (`rate`: over the minute's budget; `concurrency`: a bucket has
 * no free slot), or `lease` is the slots held.
 */
export type GateOutcome =
  | { caller: null }
  | { caller: Caller; rate: RateResult; refused: 'rate' | 'concurrency'; lease: null }
  | { caller: Caller; rate: RateResult; refused: null; lease: Lease }

/** A request's one read, to run in the gate's statement (`Gate.enterWithRead`). */
export type GatedRead = ReadStatement

export interface Gate {
  enter(req: GateRequest): Promise<GateOutcome>
  /**
   * For a request whose whole work is one read (a route declared `oneRead`): the gate and the read in one
   * statement. Its slot is held for that statement only (an advisory lock: request_gate's `p_transient`), so the lease it
   * returns holds nothing. Nothing is read unless the request is admitted with an active grant that has
   * `scopes` (`rows` is then empty); the caller still makes every other check (the IP allowlist) before using
   * the rows. Absent where the gate is not in the store (the embedded store's gate is in memory).
   */
  enterWithRead?<T extends object>(req: GateRequest, read: GatedRead): Promise<{ outcome: GateOutcome; rows: T[] }>
  /**
   * `enter`, its statement run on `connection`: a write's, ahead of its transaction's BEGIN (src/http/admission.ts,
   * "the gate in the write's first round trip"). Absent where the gate is not in the store.
   */
  enterOn?(req: GateRequest, connection: Queryable): Promise<GateOutcome>
}

export interface GateOptions {
  perMinute: number
  concurrency: number
  clock: Clock
  leaseSeconds?: number
  releaseRetryDelaysMs?: readonly number[]
}

/**
 * Background retries of a failed release: seen failing while PostgreSQL restarts, which takes seconds. They
 * end (about 15 s) well inside the 30 s lease, after which expiry would free the slot anyway.
 */
export const RELEASE_RETRY_DELAYS_MS = [250, 1000, 2000, 4000, 8000] as const

const MINUTE_MS = 60_000

function rateOf(perMinute: number, used: number, now: number, windowStart: number): RateResult {
  return {
    allowed: used <= perMinute,
    limit: perMinute,
    remaining: Math.max(0, perMinute - used),
    resetSeconds: Math.max(1, Math.ceil((windowStart + MINUTE_MS - now) / 1000)),
  }
}

/** The buckets of a request: its key, and in sandbox its Client (only one the key is granted). */
function bucketsOf(caller: Caller, req: GateRequest): string[] {
  const buckets = [`key:${caller.apiKeyId}`]
  if (req.environment === 'sandbox' && caller.grant) buckets.push(`client:${req.clientCode}`)
  return buckets
}

/**
 * The gate, telling `onUse` of every request whose key it found active (refused a limit or not): the key's last
 * use, recorded in memory and written later off the request path (src/access/key-usage.ts). The gate's own read
 * gains no write.
 */
export function gateRecordingKeyUse(gate: Gate, onUse: (apiKeyId: string) => void): Gate {
  const used = (outcome: GateOutcome) => {
    if (outcome.caller) onUse(outcome.caller.apiKeyId)
    return outcome
  }
  const recording: Gate = { enter: async (req) => used(await gate.enter(req)) }
  const on = gate.enterOn?.bind(gate)
  if (on) recording.enterOn = async (req, connection) => used(await on(req, connection))
  const withRead = gate.enterWithRead?.bind(gate)
  if (withRead) {
    recording.enterWithRead = async <T extends object>(req: GateRequest, read: GatedRead) => {
      const result = await withRead<T>(req, read)
      used(result.outcome)
      return result
    }
  }
  return recording
}

/** The gate for the store: in the store where several processes may share it, else in this process. */
export function createGate(store: Pick<Store, 'kind'> & Queryable, opts: GateOptions): Gate {
  return limitsLiveInStore(store) ? createStoreGate(store, opts) : createMemoryGate(store, opts)
}

const windowOf = (now: number) => now - (now % MINUTE_MS)

/** What a `request_gate` row says: who called, the minute's count, and which limit refused (null: admitted). */
function verdictOf(row: GateRow, req: GateRequest, perMinute: number, now: number) {
  const caller = callerOfGateRow(req.clientCode, row)
  const rate = rateOf(perMinute, row.used, now, windowOf(now))
  const refused: 'rate' | 'concurrency' | null = row.admitted ? null : rate.allowed ? 'concurrency' : 'rate'
  return { caller, rate, refused }
}

/** The caller a gate row describes (its key, and its grant for the Client in the path). */
export function callerOfGateRow(clientCode: string, row: GateRow): Caller {
  return callerFromRow(clientCode, {
    api_key_id: row.key_id,
    integration_id: row.key_integration_id,
    grant_status: row.grant_status,
    scopes: row.grant_scopes,
    ip_allowlist: row.grant_ip_allowlist,
    recovery_entry_mode: row.grant_recovery_entry_mode,
    feed_mode: row.grant_feed_mode,
    industry_profile: row.grant_industry_profile,
    receipt_delivery_owner: row.grant_receipt_delivery_owner,
  } as CallerRow)
}

/** Limits in the database, exact across every instance sharing it: one statement per request, one per release. */
export function createStoreGate(db: Queryable, opts: GateOptions): Gate {
  const leaseSeconds = opts.leaseSeconds ?? 30
  const retryDelays = opts.releaseRetryDelaysMs ?? RELEASE_RETRY_DELAYS_MS
  /**
   * Holders of this process whose request is over but whose release has not reached the store yet (it failed,
   * say while PostgreSQL restarted, and is being retried). Their slots are free in fact, so a claim of this
   * process may take them over at once: the key serves again as soon as the store is back, not after the
   * next retry. Other instances still wait for the release or the lease's expiry, which is what they can know.
   */
  const unreleased = new Set<string>()

  async function releaseWithRetries(buckets: string[] | null, holder: string, log: ReleaseLog | undefined, attempt: number) {
    try {
      await releaseSlotsNow(db, buckets, holder)
      unreleased.delete(holder)
    } catch (err) {
      const e = err as { name?: string; code?: string; message?: string }
      const failure = { errName: e.name, errCode: e.code, errMessage: e.message, attempt: attempt + 1, buckets: buckets?.length ?? null }
      const delay = retryDelays[attempt]
      if (delay === undefined) {
        unreleased.delete(holder)
        log?.error(failure, 'concurrency slot release failed; its lease expiry will free it')
        return
      }
      unreleased.add(holder)
      log?.warn({ ...failure, retryInMs: delay }, 'concurrency slot release failed; retrying in the background')
      // unref: a pending retry never keeps a stopping process alive (the lease expires on its own).
      setTimeout(() => void releaseWithRetries(buckets, holder, log, attempt + 1), delay).unref()
    }
  }

  /** What `request_gate` decides on for `req` at `now` (holder null: a gated read). */
  function gateCall(req: GateRequest, now: number, holder: string | null): GateCall {
    return {
      digest: req.digest,
      environment: req.environment,
      clientCode: req.clientCode,
      sandbox: req.environment === 'sandbox',
      windowStart: new Date(windowOf(now)),
      now: new Date(now),
      perMinute: opts.perMinute,
      concurrency: opts.concurrency,
      leaseSeconds,
      holder,
      unreleased: [...unreleased],
    }
  }

  return {
    async enterWithRead<T extends object>(req: GateRequest, read: GatedRead) {
      const now = opts.clock.now().getTime()
      const { gate, read: readRows } = await runGatedRead<T>(db, gateCall(req, now, null), read)
      if (!gate) return { outcome: { caller: null }, rows: [] }
      const { caller, rate, refused } = verdictOf(gate, req, opts.perMinute, now)
      if (refused) return { outcome: { caller, rate, refused, lease: null }, rows: [] }
      // The slot was held for the statement and went with it: the lease holds nothing.
      return { outcome: { caller, rate, refused, lease: { release: async () => {} } }, rows: readRows }
    },
    enter: (req) => enterOn(req, db),
    enterOn,
  }

  async function enterOn(req: GateRequest, connection: Queryable): Promise<GateOutcome> {
    const holder = randomUUID()
    const now = opts.clock.now().getTime()
    let row: GateRow | undefined
    try {
      row = await runGate(connection, gateCall(req, now, holder))
    } catch (err) {
      // The statement may have committed before its answer was lost: give back whatever it took.
      await releaseWithRetries(null, holder, req.log, 0)
      throw err
    }
    if (!row) return { caller: null }
    const { caller, rate, refused } = verdictOf(row, req, opts.perMinute, now)
    if (refused) return { caller, rate, refused, lease: null }
    const buckets = bucketsOf(caller, req)
    let released = false
    return {
      caller,
      rate,
      refused: null,
      lease: {
        async release() {
          if (released) return
          released = true
          await releaseWithRetries(buckets, holder, req.log, 0)
        },
        async releaseIn(tx) {
          if (released) return () => {}
          await releaseSlots(tx, buckets, holder)
          return () => {
            released = true
          }
        },
      },
    }
  }
}

/**
 * Limits in this process's memory, for a store only this process uses (the embedded one). Exact, and free of
 * round trips: the key lookup is the gate's only statement.
 */
export function createMemoryGate(db: Queryable, opts: GateOptions): Gate {
  /** Per bucket: the window it was last counted in, and its count there. */
  const windows = new Map<string, { start: number; count: number }>()
  /** Per bucket: slots held. */
  const held = new Map<string, number>()

  function take(bucket: string): boolean {
    const n = held.get(bucket) ?? 0
    if (n >= opts.concurrency) return false
    held.set(bucket, n + 1)
    return true
  }
  function give(bucket: string): void {
    const n = (held.get(bucket) ?? 0) - 1
    if (n > 0) held.set(bucket, n)
    else held.delete(bucket)
  }
  function count(bucket: string, windowStart: number): number {
    const w = windows.get(bucket)
    if (w && w.start === windowStart) return ++w.count
    windows.set(bucket, { start: windowStart, count: 1 })
    return 1
  }

  return {
    async enter(req) {
      // The key's slot, by its digest (one key has one digest), taken before the lookup: while the lookup waits
      // for the store, a second request of the key already finds it taken.
      const early = `digest:${req.digest}`
      const tookEarly = take(early)
      let caller: Caller | null
      try {
        // PGlite runs its statements synchronously on this thread: without a turn of the event loop here, a
        // request would be served to its end before the server even read the next one, and no request would
        // ever meet another in flight. One turn lets requests already received reach this gate (and find the
        // slot taken) while this one is served.
        if (tookEarly) await new Promise<void>((resolve) => setImmediate(resolve))
        caller = await lookupKey(db, req.digest, req.environment, req.clientCode, opts.clock.now())
      } catch (err) {
        if (tookEarly) give(early)
        throw err
      }
      if (!caller) {
        if (tookEarly) give(early)
        return { caller: null }
      }
      const now = opts.clock.now().getTime()
      const windowStart = now - (now % MINUTE_MS)
      const buckets = bucketsOf(caller, req)
      let used = 0
      for (const b of buckets) used = Math.max(used, count(b, windowStart))
      const rate = rateOf(opts.perMinute, used, now, windowStart)
      const taken = tookEarly ? [early] : []
      const giveBack = () => {
        for (const b of taken.splice(0)) give(b)
      }
      if (!rate.allowed) {
        giveBack()
        return { caller, rate, refused: 'rate', lease: null }
      }
      // The other buckets (the Client's, in sandbox) are only known now.
      const rest = buckets.slice(1)
      if (!tookEarly || !rest.every((b) => take(b) && taken.push(b) > 0)) {
        giveBack()
        return { caller, rate, refused: 'concurrency', lease: null }
      }
      return {
        caller,
        rate,
        refused: null,
        lease: {
          async release() {
            giveBack()
          },
        },
      }
    },
  }
}

/**
 * The hosted payment page's flood guard (docs/decisions.md, "The hosted page's rate limit"): at most `perMinute`
 * requests per client address, in the API gate's fixed one-minute windows of the base clock (`rateOf`), counted
 * in this process's memory. Deliberately per instance, even on a PostgreSQL several instances share: the point
 * is to keep a flood away from the store, and a counter in the store would cost the store a write per flooding
 * request, the very load it is there to refuse. With N instances behind a balancer an address gets at most N
 * times the budget, still a bounded load.
 *
 * The address is the one TRUST_PROXY decides (`request.ip`), as `addressKey` reads it: however a proxy spells
 * one address (a port, brackets, a zone id, IPv4-mapped IPv6, upper or lower case, zeros compressed or not) it is
 * one count, an IPv6 client counted by its /64 (one subscriber's network: an attacker holding a /64 chooses among
 * 2^64 addresses). What is not an address (anything `addressKey` refuses) is counted as the connection's own
 * address (`fallback`), never as itself: a text is not a way to a fresh count.
 *
 * Memory is bounded: the counts are dropped when the window turns, and at most `maxAddresses` addresses are
 * counted in a window. Beyond them the address seen least recently is forgotten to make room, so a new debtor
 * always has a count of its own (never one count every newcomer shares, which a flood from that many addresses
 * would exhaust and so lock every new debtor out). What a flood from more addresses than that gains is that its
 * own oldest addresses start again from zero: each address still sends at most the budget between two of its
 * forgettings, and the process does not grow. docs/decisions.md, "The hosted page's rate limit".
 */
export interface AddressLimiter {
  /**
   * Counts one request from `address` (the connection's address `fallback` when `address` is not one) and says
   * whether it is within the minute's budget.
   */
  hit(address: string, fallback?: string): RateResult
}

export function createAddressLimiter(opts: { perMinute: number; clock: Clock; maxAddresses?: number }): AddressLimiter {
  const maxAddresses = opts.maxAddresses ?? 100_000
  let window = Number.NEGATIVE_INFINITY
  // In order of last use (a Map keeps insertion order; a count is re-inserted at each hit): the first is the
  // least recently seen.
  const counts = new Map<string, number>()
  return {
    hit(address, fallback) {
      const now = opts.clock.now().getTime()
      const start = windowOf(now)
      if (start !== window) {
        window = start
        counts.clear()
      }
      const key = addressKey(address) ?? (fallback === undefined ? null : addressKey(fallback)) ?? 'unknown'
      const used = (counts.get(key) ?? 0) + 1
      counts.delete(key)
      if (counts.size >= maxAddresses) counts.delete(counts.keys().next().value as string)
      counts.set(key, used)
      return rateOf(opts.perMinute, used, now, start)
    },
  }
}

const OCTET = '(?:25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)'
/** An IPv4 address in dotted decimal, no leading zeros: the spelling proxies write (not `010.1`, `0x7f.1` or `1`). */
const DOTTED_QUAD = new RegExp(`^${OCTET}(?:\\.${OCTET}){3}$`)

/**
 * What one client is counted as: its IPv4 address (an IPv4-mapped IPv6 address as its IPv4), or its IPv6 /64 as
 * `xxxx:xxxx:xxxx:xxxx::/64` (lower-case hex, no leading zeros, four groups always); null when `address` is not
 * an address. Accepted spellings: `a.b.c.d`, `a.b.c.d:port`, IPv6 in any RFC 4291 form with an optional zone id
 * (`%eth0`, `%25eth0`), and either in brackets, `[...]` or `[...]:port`. IPv4 in other forms than dotted decimal
 * (octal, hex, fewer parts) is refused: parsers disagree on what `010.0.0.1` is.
 */
export function addressKey(raw: string): string | null {
  let text = raw.trim()
  const bracketed = /^\[([^\]]*)\](?::\d{1,5})?$/.exec(text)
  if (bracketed) text = bracketed[1] as string
  else if (/^[\d.]+:\d{1,5}$/.test(text)) text = text.slice(0, text.lastIndexOf(':'))
  if (text.includes(':')) text = text.split('%')[0] as string
  if (DOTTED_QUAD.test(text)) return ipaddr.IPv4.parse(text).toString()
  if (!text.includes(':') || !ipaddr.IPv6.isValid(text)) return null
  const parsed = ipaddr.IPv6.parse(text)
  if (parsed.isIPv4MappedAddress()) return parsed.toIPv4Address().toString()
  return `${parsed.parts
    .slice(0, 4)
    .map((p) => p.toString(16))
    .join(':')}::/64`
}
