import { randomUUID } from 'node:crypto'
import { type Agent, request } from 'undici'
import type { KeyRing } from '../domain/key-ring.ts'
import type { Clock } from '../domain/time.ts'
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
} from '../outbound/destination.ts'
import { signatureHeader } from '../resources/webhooks/secrets.ts'
import { claimKey } from '../store/lease-holder.ts'
import type { Store } from '../store/store.ts'
import { createWorker, serveInLanes, type Worker } from './worker.ts'

/**
 * The delivery engine: one way to send signed deliveries to a destination someone configured (webhooks, receipts).
 * A channel (webhook-dispatcher.ts, receipt-dispatcher.ts) supplies only what is its own: how its deliveries come
 * from the feed, which targets have work, how a claim reads its target and grant and leases its items, what its
 * grant lets through, the bytes of a delivery and where outcomes are written. The engine owns the rest. Guarantees:
 * - Work is found per target in one read-only statement, then claimed per target (the channel's claim names one
 *   client: `client_code = $1 ... FOR UPDATE SKIP LOCKED`), as a lease with a token and the holder's key
 *   (src/store/lease-holder.ts); outcomes are written only under the token, so a worker whose lease was taken
 *   changes nothing. No claim is made while the instance's lease lock is not held, and nothing is sent once it is lost.
 * - The target and its grant are read inside the claim's transaction. A grant no longer active disables the target
 *   `grant_revoked`; a URL that no longer passes the destination rules, or a name that now resolves to a non-public
 *   address, disables it `destination_unsafe` (the channel's disable writes the audit event); nothing is sent.
 * - A signing secret that no key of THIS instance's ring opens is not the target's fault (a rolling key rotation, an
 *   instance started with another key): one log line, the claim handed back untouched, and another instance (or this
 *   one once its ring holds the key) sends it. No target is ever disabled for it.
 * - Each attempt: the connection to the checked address (pinnedAgent), `Service-Signature` under every secret the
 *   channel gives, 5 s for everything, no redirects (a 3xx fails), the response body discarded after at most 64 KiB,
 *   a bounded number of sockets per destination address and of targets served at once.
 * - Failures are retried on the channel's schedule for the item (the webhook schedule; seconds for a test receipt),
 *   then abandoned; a retry due sooner than the next scheduled run wakes the engine then.
 */

/** One claimed delivery, as the engine needs it. */
export interface DeliveryItem {
  id: string
  /** Attempts in the current round (a replay or a requeue starts a new round). */
  roundAttempts: number
}

/** What a channel's claim read and leased, in one transaction. */
export interface Claimed<I extends DeliveryItem> {
  clientCode: string
  /** The target's log name (never its URL): `webhook endpoint <integration>/<client>`, `receipt route <client>`. */
  target: string
  /** The configured URL, or null when the target takes no deliveries now (disabled meanwhile): the items go back. */
  url: string | null
  /** False when the grant that governs the target is no longer active. */
  grantActive: boolean
  items: I[]
  /** The target's budget ran out with work left: serve it again at this time (real time). */
  retryAt?: string | null
}

export interface AttemptOutcome {
  id: string
  status: 'pending' | 'delivered' | 'abandoned'
  nextAttemptAt: string | null
  lastError: string | null
  attemptedAt: string
  durationMs: number
  httpStatus: number | null
  errorClass: string | null
}

export type DisableReason = 'grant_revoked' | 'destination_unsafe'

/** The lease a claim takes: its token, the holder's key, and the times it is taken at and held until. */
export interface Lease {
  token: string
  holder: number | null
  /** The target's time (what is due). */
  now: string
  /** Real time (leases, budgets). */
  leaseNow: string
  leaseUntil: string
}

export interface DeliveryChannel<U, I extends DeliveryItem, C extends Claimed<I>> {
  name: string
  userAgent: string
  /** The header naming what is delivered (`service-event-id`: the feed event; `service-receipt-id`: the receipt). */
  idHeader(item: I): [string, string]
  /** Sockets per destination address; how many items one claim takes. */
  connections: number
  maxAgents: number
  /** A lease outlives the slowest claim's attempts by a wide margin. */
  leaseMs: number
  /** Turns committed facts into deliveries (the channel's own; stops early when `stopping()`). */
  derive(stopping: () => boolean): Promise<void>
  /** The targets with due work: one read-only statement. */
  due(): Promise<U[]>
  /** Runs `fn` at the target's time (a sandbox client's clock); at once when omitted. */
  within?<T>(unit: U, fn: () => T): T
  claim(unit: U, lease: Lease): Promise<C | null>
  /** The channel's own admission of claimed items (what the grant may read); settles the rest, returns what goes. */
  admit?(claimed: C, token: string): Promise<I[]>
  /** The signing secrets, the current first; null when no key of `ring` opens the current one. */
  secrets(ring: KeyRing, claimed: C): string[] | null
  body(item: I, claimed: C): string
  /** The retry schedule of an item; a ping's is empty (attempted once). */
  schedule(item: I): readonly number[]
  complete(claimed: C, token: string, outcomes: AttemptOutcome[]): Promise<void>
  release(claimed: C, token: string, ids: string[]): Promise<void>
  disable(claimed: C, reason: DisableReason): Promise<void>
}

export interface EngineOptions {
  store: Store
  /** The targets' time: what is due, the times recorded, the retry schedule. */
  clock: Clock
  /** Real time: leases and signature timestamps. */
  realClock: Clock
  resolver: Resolver
  allowLoopback: boolean
  keyRing: () => Promise<KeyRing>
  intervalMs: number
  timeoutMs: number
  /** Targets served at once. */
  concurrency: number
  wakeGapMs: number
  /** A run that sent something is followed at once by the next (a backlog drains run after run). */
  repeatWhileWorking?: boolean
  /** One line per target whose secret this instance's key ring cannot open (never the secret or the URL). */
  onUnreadableSecret?: (fields: { channel: string; target: string }) => void
  onError?: (err: unknown) => void
}

/** A delivery worker: a worker that can also be woken at a later moment (a short retry, a delayed first attempt). */
export interface DeliveryWorker extends Worker {
  wakeIn(ms: number): void
}

export function errorClass(err: unknown): string {
  const e = err as { name?: string; code?: string; cause?: { code?: string } }
  const code = e.code ?? e.cause?.code ?? ''
  if (e.name === 'TimeoutError' || e.name === 'AbortError' || /TIMEOUT/.test(code)) return 'timeout'
  if (code === 'ECONNREFUSED') return 'connection_refused'
  if (/CERT|TLS|SSL|SELF_SIGNED|UNABLE_TO_VERIFY/.test(code)) return 'tls_error'
  return 'connection_error'
}

/** The agent pool: one pinned agent per destination origin and checked address, the oldest closed past `max`. */
function agentPool(max: number, connections: number, timeoutMs: number) {
  const agents = new Map<string, Agent>()
  return {
    get(dest: Destination, address: ResolvedAddress): Agent {
      const key = `${dest.url.origin}|${address.address}`
      let agent = agents.get(key)
      if (!agent) {
        if (agents.size >= max) {
          const [oldestKey, oldest] = agents.entries().next().value as [string, Agent]
          agents.delete(oldestKey)
          void oldest.close().catch(() => {})
        }
        agent = pinnedAgent(address, { connections, timeoutMs })
        agents.set(key, agent)
      }
      return agent
    },
    async close() {
      await Promise.all([...agents.values()].map((a) => a.close().catch(() => {})))
      agents.clear()
    },
  }
}

/** One timer for the earliest moment something is due sooner than the next scheduled run. */
function earliestWake(stopping: () => boolean, wake: () => void) {
  let timer: NodeJS.Timeout | null = null
  let timerAt = Number.POSITIVE_INFINITY
  const wakeIn = (inMs: number): void => {
    const delay = Math.max(0, inMs) + 5
    const at = performance.now() + delay
    if (stopping() || at >= timerAt) return
    if (timer) clearTimeout(timer)
    timerAt = at
    timer = setTimeout(() => {
      timer = null
      timerAt = Number.POSITIVE_INFINITY
      wake()
    }, delay)
    timer.unref()
  }
  return Object.assign(wakeIn, {
    clear() {
      if (timer) clearTimeout(timer)
      timer = null
      timerAt = Number.POSITIVE_INFINITY
    },
  })
}

export function createDeliveryEngine<U, I extends DeliveryItem, C extends Claimed<I>>(
  opts: EngineOptions,
  channel: DeliveryChannel<U, I, C>,
): DeliveryWorker {
  const { store, clock, realClock: real, resolver, allowLoopback, timeoutMs } = opts
  const agents = agentPool(channel.maxAgents, channel.connections, timeoutMs)
  /** Set by stop(): the run in progress finishes the targets it is serving and starts nothing more. */
  let stopping = false
  /** Targets whose secret this instance could not open, said once until it opens again. */
  const unreadable = new Set<string>()

  const wakeIn = earliestWake(
    () => stopping,
    () => worker.wake(),
  )

  function failure(item: I, started: Date, perf: number, cls: string, httpStatus: number | null): AttemptOutcome {
    const schedule = channel.schedule(item)
    const n = item.roundAttempts + 1
    const abandon = n > schedule.length
    return {
      id: item.id,
      status: abandon ? 'abandoned' : 'pending',
      // The next attempt is due the schedule's interval after this one started.
      nextAttemptAt: abandon ? null : new Date(started.getTime() + (schedule[n - 1] as number)).toISOString(),
      lastError: httpStatus === null ? cls : `${cls} ${httpStatus}`,
      attemptedAt: started.toISOString(),
      durationMs: Math.round(performance.now() - perf),
      httpStatus,
      errorClass: cls,
    }
  }

  /** One attempt: the outcome, never thrown. */
  async function attempt(dest: Destination, address: ResolvedAddress, item: I, claimed: C, secrets: string[]): Promise<AttemptOutcome> {
    const started = clock.now()
    const perf = performance.now()
    const body = channel.body(item, claimed)
    const t = Math.floor(real.now().getTime() / 1000)
    try {
      const res = await request(dest.url, {
        method: 'POST',
        dispatcher: agents.get(dest, address),
        headers: {
          'content-type': 'application/json',
          'user-agent': channel.userAgent,
          ...Object.fromEntries([channel.idHeader(item)]),
          'service-signature': signatureHeader(secrets, t, body),
        },
        body,
        signal: AbortSignal.timeout(timeoutMs),
      })
      // The body is never needed: read at most 64 KiB of it (so the socket can be reused), then drop it.
      await res.body.dump({ limit: 64 * 1024 }).catch(() => {})
      const status = res.statusCode
      if (status >= 200 && status < 300) {
        const durationMs = Math.round(performance.now() - perf)
        const at = started.toISOString()
        return {
          id: item.id,
          status: 'delivered',
          nextAttemptAt: null,
          lastError: null,
          attemptedAt: at,
          durationMs,
          httpStatus: status,
          errorClass: null,
        }
      }
      return failure(item, started, perf, status >= 300 && status < 400 ? 'redirect' : 'http_status', status)
    } catch (err) {
      return failure(item, started, perf, errorClass(err), null)
    }
  }

  /** Checks what the claim read, then sends what may go; the number of attempts recorded. */
  async function send(claimed: C, token: string, holder: number | null): Promise<number> {
    const ids = claimed.items.map((i) => i.id)
    if (!claimed.grantActive) {
      // Authorization as it is now: a revoked grant disables the target and nothing is sent.
      await channel.disable(claimed, 'grant_revoked')
      await channel.release(claimed, token, ids)
      return 0
    }
    if (claimed.url === null) {
      await channel.release(claimed, token, ids)
      return 0
    }
    const items = channel.admit ? await channel.admit(claimed, token) : claimed.items
    if (items.length === 0) return 0
    const sending = items.map((i) => i.id)
    let dest: Destination
    let address: ResolvedAddress
    try {
      dest = parseDestination(claimed.url, { allowLoopback })
      // The name is resolved again before the attempts: a non-public address disables the target, nothing is sent.
      address = await resolveDestination(dest, resolver)
    } catch (err) {
      if (err instanceof UnsafeDestinationError) {
        await channel.release(claimed, token, sending)
        await channel.disable(claimed, 'destination_unsafe')
        return 0
      }
      if (!(err instanceof ResolutionError)) throw err
      const started = clock.now()
      const outcomes = items.map((i) => failure(i, started, performance.now(), 'dns_error', null))
      await channel.complete(claimed, token, outcomes)
      return outcomes.length
    }
    const secrets = channel.secrets(await opts.keyRing(), claimed)
    const key = `${claimed.clientCode}|${claimed.target}`
    if (secrets === null) {
      // Not the target's fault: handed back for an instance whose ring opens it (docs/decisions.md, "Key rotation").
      await channel.release(claimed, token, sending)
      if (!unreadable.has(key)) opts.onUnreadableSecret?.({ channel: channel.name, target: claimed.target })
      unreadable.add(key)
      return 0
    }
    unreadable.delete(key)
    // The lock the claim was taken under is gone: the items are forfeited (any instance sends them now).
    if (holder !== null && store.leaseHolder?.current() !== holder) return 0
    const outcomes = await Promise.all(items.map((i) => attempt(dest, address, i, claimed, secrets)))
    await channel.complete(claimed, token, outcomes)
    // A retry due before the next scheduled run (a test receipt's seconds) wakes the engine then.
    const now = clock.now().getTime()
    for (const o of outcomes) {
      if (o.nextAttemptAt !== null && Date.parse(o.nextAttemptAt) - now < opts.intervalMs) wakeIn(Date.parse(o.nextAttemptAt) - now)
    }
    return outcomes.length
  }

  async function serve(unit: U): Promise<number> {
    // No claim while the instance's lease lock is not held (src/store/lease-holder.ts).
    const holder = claimKey(store.leaseHolder)
    if (holder === 'not_held') return 0
    const token = randomUUID()
    const realNow = real.now()
    const claimed = await channel.claim(unit, {
      token,
      holder,
      now: clock.now().toISOString(),
      leaseNow: realNow.toISOString(),
      leaseUntil: new Date(realNow.getTime() + channel.leaseMs).toISOString(),
    })
    if (!claimed) return 0
    if (claimed.retryAt) wakeIn(Date.parse(claimed.retryAt) - realNow.getTime())
    if (claimed.items.length === 0 && claimed.grantActive) return 0
    return send(claimed, token, holder)
  }

  /** One run: derive deliveries, then serve every target with due work; true when it attempted any. */
  async function runOnce(): Promise<boolean> {
    await channel.derive(() => stopping)
    if (stopping) return false
    const units = await channel.due()
    const within = channel.within?.bind(channel) ?? (<T>(_u: U, fn: () => T) => fn())
    // Stopping: the targets being served finish (their deliveries sent and recorded), no other is claimed.
    const attempts = await serveInLanes(units, opts.concurrency, (u) => within(u, () => serve(u)), {
      stopping: () => stopping,
      onError: opts.onError,
    })
    return attempts > 0
  }

  const worker = createWorker({
    name: channel.name,
    // Runs at start, then every intervalMs measured from the start of each run (and, for a channel that drains a
    // backlog, at once after a run that sent something).
    intervalMs: opts.intervalMs,
    runOnce,
    ...(opts.repeatWhileWorking ? { repeatWhileWorking: true } : {}),
    minWakeGapMs: opts.wakeGapMs,
    onStarting: () => {
      stopping = false
    },
    // No run starts any more; the one in progress finishes the targets it is serving (every attempt has its timeout)
    // and records their outcomes, then stops: nothing claimed is left to wait for its lease.
    onStopping: () => {
      stopping = true
    },
    afterStop: async () => {
      wakeIn.clear()
      await agents.close()
    },
    onError: (err) => opts.onError?.(err),
  })
  return Object.assign(worker, { wakeIn: (ms: number) => wakeIn(ms) })
}

export { ATTEMPT_TIMEOUT_MS }
