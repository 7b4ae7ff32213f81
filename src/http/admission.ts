import type { FastifyReply, FastifyRequest } from 'fastify'
import { authorize, type Caller, type Grant } from '../access/grants.ts'
import { digestSecret } from '../access/keys.ts'
import type { Environment } from '../config.ts'
import { Problem } from '../domain/problems.ts'
import type { Scope } from '../domain/scopes.ts'
import { oneStatement } from '../store/one-statement.ts'
import type { Queryable } from '../store/store.ts'
import type { SlotRelease } from '../store/transactions.ts'
import { bearerToken, constantTimeEqualHex, invalidKey, presentedKeyDigest } from './auth.ts'
import { assertStorableParameters } from './json-body.ts'
import type { Gate, GatedRead, GateOutcome, GateRequest, Lease } from './limits.ts'
import { checkMediaType } from './media.ts'
import type { RouteDef } from './route.ts'
import { parseOrThrow } from './validation.ts'

/**
 * Admission: what the service decides about a request before its handler does any work, and how the request's
 * concurrency slot is given back. src/http/server.ts wires these steps to Fastify; what happens, in order:
 *
 * 1. `open` (the route's onRequest): the exchange begins. Its slot, once one is held, is given back when the
 *    exchange ends, whatever stage the request is at: the response's 'close' (written, or its connection
 *    ended), or the request's 'close' with `aborted` (the client went away before the request was complete;
 *    a pipelined request has no response socket yet). Measured before this: a request aborted while its slot
 *    was being claimed kept the key at 429 for the whole 30 s lease.
 * 2. `enter` (the same onRequest, before any byte of the body is read): route parameters and query (storable
 *    text, then their schemas: before authentication, spec endpoint rule 12); an operator route's token (401);
 *    an api_key route's gate (src/http/limits.ts), applied by `admit` in the order every request meets it: the
 *    key (401), the rate headers, the limits (429 with Retry-After), the grant, its scopes and IP allowlist
 *    (403); then the body's media type (415). A client gone while the gate waited on the store: the request
 *    stops there, holding nothing, unanswered. The result is the request's `Entry`, complete when it is made.
 *    A one-read route on a gate that runs in its read (PostgreSQL) does not meet the gate here: its entry
 *    carries the gate request for step 3 instead (`{ inRead }`).
 * 3. The handler (server.ts): the body parsed against its schema. A one-read route's declared read runs now
 *    (`read`): on PostgreSQL in one statement with the gate, admitted from that statement's gate row before
 *    anything the read found is used (so 401/429/403 answer first), the slot held for the statement only; a
 *    read that ran no statement (it answered, or threw, without one) meets the gate on its own right after.
 *    The handler receives the read's result and the grant as plain values.
 *    A write route declared `gateInWrite` (its work is one request transaction) whose key this process admitted
 *    last time for this Client, as the same caller, on PostgreSQL: its gate leaves in that transaction's first round
 *    trip instead, ahead of BEGIN on the same connection (`{ inWrite }`; src/store/store.ts, AheadOfBegin). The
 *    handler runs with the grant it was admitted with last time; the gate's answer, which comes before any other of
 *    the transaction, decides: a refusal (401, 429, 403) fails every statement of the transaction, which rolls back
 *    and answers it; a caller that changed since (a grant's scopes or modes) rolls it back and runs the handler
 *    once more with the caller the gate returned (`AdmissionChanged`). A body that fails (malformed, invalid, too
 *    large), or a handler that ends before its transaction, meets the gate on its own first (`meetPending`): 401,
 *    429 and 403 still answer before anything of the body. A key not admitted last time never reaches a
 *    transaction before its gate has answered.
 * 4. A write frees the slot inside its transaction, as its last statement before COMMIT (`Slot.releaseIn`,
 *    src/store/transactions.ts), so the slot is free exactly when the write commits.
 * 5. onSend: a slot still held is given back before the response is written (`releaseBeforeSend`), so a client
 *    that waits for each answer before sending the next request is never refused.
 * The hosted payment page's routes are not in the route table: they hold no slot, and their flood guard is per
 * client address (limits.ts, createAddressLimiter, in the page's own handler).
 */

/** The request's concurrency slot, from its claim until it is given back; `release` never throws. */
export interface Slot extends SlotRelease {
  /** The HTTP exchange has ended (response written, or the client went away). */
  readonly closed: boolean
  /** The slot the gate took for this request (null: none, the request was refused). */
  hold(lease: Lease | null): void
  /** Gives the slot back, once. Never throws: it runs after the request's work (often after commit). */
  release(): Promise<void>
}

/** Who an api_key request was admitted as: its key, and its grant for the Client in the path. */
export interface Admitted {
  caller: Caller
  grant: Grant
}

/** What `enter` settled for a request: made once, complete, read by the handler. */
export interface Entry {
  params: Record<string, unknown>
  query: Record<string, unknown>
  /**
   * `admitted`: the gate has run (null on routes without an API key); `inRead`: it runs in the route's read;
   * `inWrite`: it runs ahead of the write's transaction, and the handler runs as the caller admitted last time.
   */
  gate: { admitted: Admitted | null } | { inRead: GateRequest } | { inWrite: Admitted }
}

/** A gate that has not run yet: it leaves with the write's transaction (step 3), or on its own (`meetPending`). */
export interface PendingGate {
  def: RouteDef
  req: GateRequest
  clientCode: string
  /** The caller this process admitted last time for the key and Client: the handler runs as it until the gate says. */
  speculated: Caller
}

/**
 * The gate, run ahead of a write's transaction, admitted another caller than the one the handler ran as (its grant
 * changed since this process last admitted the key): the transaction rolled back, and the handler runs once more as
 * `admitted`, whose slot is held.
 */
export class AdmissionChanged extends Error {
  override readonly name = 'AdmissionChanged'
  constructor(readonly admitted: Admitted) {
    super('the request gate admitted another caller than the one the write ran as')
  }
}

/** One request's exchange with the admission: its slot, its entry, and which limit refused it if one did. */
export interface Exchange {
  readonly slot: Slot
  /** Set by the route's onRequest once `enter` has settled; the handler runs only after that. */
  entry: Entry | null
  /** Which limit refused the request (its 429), for the metrics (src/http/metrics.ts); null when none did. */
  refusedBy: 'rate' | 'concurrency' | null
  /** The gate of an `inWrite` entry until it has run (step 3). */
  pendingGate: PendingGate | null
}

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by a route of the table's onRequest (server.ts); null on infrastructure routes and pages. */
    exchange: Exchange | null
  }
}

export interface AdmissionDeps {
  gate: Gate
  environment: Environment
  /** The operator token's digest; a function when it is known only once the store is reachable (src/main.ts). */
  adminTokenDigest: string | (() => string)
  /** The store a one-read route's read runs on (with the gate in its statement where the gate can). */
  db: Queryable
}

/**
 * The operator token check of every operator route (and of /metrics, src/http/metrics.ts): a missing or wrong
 * token is `401 invalid_admin_token`, compared in constant time.
 */
export function assertOperatorToken(authorization: string | undefined, adminTokenDigest: string | (() => string)): void {
  const token = bearerToken(authorization)
  const expected = typeof adminTokenDigest === 'function' ? adminTokenDigest() : adminTokenDigest
  if (!token || !constantTimeEqualHex(digestSecret(token), expected)) {
    throw new Problem('invalid_admin_token', 'The operator token is missing or wrong.')
  }
}

/** The exchange's slot: given back on the exchange's end (step 1), on send (step 5), or inside a write (step 4). */
function openSlot(request: FastifyRequest, reply: FastifyReply): Slot {
  let lease: Lease | null = null
  let closed = request.raw.socket?.destroyed === true
  const release = (): Promise<void> => {
    const held = lease
    if (!held) return Promise.resolve()
    lease = null
    return held.release()
  }
  const onEnd = () => {
    closed = true
    void release()
  }
  reply.raw.once('close', onEnd)
  request.raw.once('close', () => {
    if (request.raw.aborted) onEnd()
  })
  return {
    get closed() {
      return closed
    },
    hold(l) {
      lease = l
    },
    release,
    async releaseIn(tx) {
      return lease?.releaseIn ? lease.releaseIn(tx) : () => {}
    },
  }
}

/**
 * How long a response waits for its slot's release. A store that hangs (no answer while PostgreSQL restarts;
 * the pool waits up to 10 s for a connection) must not hold back a committed answer: the release goes on in
 * the background, and the client's next request may meet a 429 with Retry-After 1 meanwhile.
 */
const RELEASE_WAIT_MS = 2000

/** Step 5: gives a slot still held back before the response is written, waiting for it at most RELEASE_WAIT_MS. */
export async function releaseBeforeSend(exchange: Exchange | null): Promise<void> {
  if (!exchange) return
  let timer: NodeJS.Timeout | undefined
  const waited = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, RELEASE_WAIT_MS)
  })
  try {
    await Promise.race([exchange.slot.release(), waited])
  } finally {
    clearTimeout(timer)
  }
}

/** How many (key, Client) pairs the admission remembers the last admitted caller of (the oldest is forgotten first). */
const REMEMBERED_CALLERS = 10_000

/**
 * The gate, remembering the caller each (key, Client) pair was last admitted as, and forgetting it on any other
 * outcome. Only a hint of this process, never an authorization: it decides whether a write's gate may leave with
 * its transaction (step 3), whose answer is then checked against it.
 */
function rememberingCallers(gate: Gate): { gate: Gate; lastAdmitted(req: GateRequest): Caller | undefined } {
  const callers = new Map<string, Caller>()
  const keyOf = (req: GateRequest) => `${req.digest}\u0000${req.clientCode}`
  const seen = (req: GateRequest, outcome: GateOutcome): GateOutcome => {
    const key = keyOf(req)
    callers.delete(key)
    if (outcome.caller && !outcome.refused) {
      callers.set(key, outcome.caller)
      if (callers.size > REMEMBERED_CALLERS) callers.delete(callers.keys().next().value as string)
    }
    return outcome
  }
  const remembering: Gate = { enter: async (req) => seen(req, await gate.enter(req)) }
  const on = gate.enterOn?.bind(gate)
  if (on) remembering.enterOn = async (req, connection) => seen(req, await on(req, connection))
  const withRead = gate.enterWithRead?.bind(gate)
  if (withRead) {
    remembering.enterWithRead = async <T extends object>(req: GateRequest, read: GatedRead) => {
      const result = await withRead<T>(req, read)
      seen(req, result.outcome)
      return result
    }
  }
  return { gate: remembering, lastAdmitted: (req) => callers.get(keyOf(req)) }
}

/** Two callers alike: the same key, Integration and grant (its scopes, allowlist and modes; a set by its members). */
function sameCaller(a: Caller, b: Caller): boolean {
  const members = (_key: string, value: unknown) => (value instanceof Set ? [...value].sort() : value)
  return JSON.stringify(a, members) === JSON.stringify(b, members)
}

/** The client went away while the gate was waiting on the store: stop here, holding nothing. */
function abandon(request: FastifyRequest, reply: FastifyReply, exchange: Exchange, stage: string): Promise<void> {
  request.log.info({ stage }, 'client closed the connection before the request was served')
  // Hijacked, Fastify runs nothing more for this request (no body parsing that would wait forever on a
  // closed stream, no handler); there is no one to answer.
  reply.hijack()
  return exchange.slot.release()
}

/** The gate's outcome applied, in the order every request meets it (see step 2). */
function admit(
  def: RouteDef,
  request: FastifyRequest,
  reply: FastifyReply,
  exchange: Exchange,
  clientCode: string,
  outcome: GateOutcome,
): Admitted {
  if (!outcome.caller) throw invalidKey()
  const rate = outcome.rate
  exchange.refusedBy = outcome.refused
  reply.header('ratelimit-policy', `"per-minute";q=${rate.limit};w=60`)
  reply.header('ratelimit', `"per-minute";r=${rate.remaining};t=${rate.resetSeconds}`)
  if (outcome.refused === 'rate') {
    throw new Problem('rate_limit_exceeded', `At most ${rate.limit} requests a minute are accepted; retry after ${rate.resetSeconds} s.`, {
      headers: { 'retry-after': String(rate.resetSeconds) },
    })
  }
  if (outcome.refused === 'concurrency') {
    throw new Problem(
      'rate_limit_exceeded',
      'Another request with this API key (or, in sandbox, this client) is still running; send one at a time.',
      { headers: { 'retry-after': '1' } },
    )
  }
  const grant = authorize(outcome.caller, clientCode, scopesOf(def), request.ip)
  checkMediaType(def, request)
  return { caller: outcome.caller, grant }
}

/**
 * The caller admitted last time, authorized for this route as it would be now (its scopes, the IP allowlist, the
 * body's media type); null when it would be refused, so that the gate runs first and answers the refusal.
 */
function speculate(def: RouteDef, request: FastifyRequest, clientCode: string, caller: Caller): Admitted | null {
  try {
    const grant = authorize(caller, clientCode, scopesOf(def), request.ip)
    checkMediaType(def, request)
    return { caller, grant }
  } catch {
    return null
  }
}

/** A gate's outcome for a pending gate: the slot held, the refusals thrown (step 2's order), who was admitted. */
function settlePending(request: FastifyRequest, reply: FastifyReply, exchange: Exchange, pending: PendingGate, outcome: GateOutcome) {
  if (outcome.caller) exchange.slot.hold(outcome.lease)
  // Closed meanwhile: its 'close' found no slot to give back.
  if (exchange.slot.closed) void exchange.slot.release()
  return admit(pending.def, request, reply, exchange, pending.clientCode, outcome)
}

export function createAdmission(admissionDeps: AdmissionDeps) {
  const remembered = rememberingCallers(admissionDeps.gate)
  const deps = { ...admissionDeps, gate: remembered.gate }
  return {
    /** Step 1. */
    open(request: FastifyRequest, reply: FastifyReply): Exchange {
      return { slot: openSlot(request, reply), entry: null, refusedBy: null, pendingGate: null }
    },

    /**
     * Step 3 for an `inWrite` entry: the request's slot, carrying its gate to send ahead of the write's BEGIN. The
     * gate's answer is checked against the caller the handler runs as: a refusal rejects (and with it every answer
     * of the transaction), another caller rejects with AdmissionChanged. A transaction run again (a connection lost
     * before BEGIN's answer) sends the gate again unless it answered.
     */
    admittingSlot(request: FastifyRequest, reply: FastifyReply, exchange: Exchange): SlotRelease {
      const enterOn = deps.gate.enterOn
      return {
        releaseIn: (tx) => exchange.slot.releaseIn(tx),
        admitIn: async (connection) => {
          const pending = exchange.pendingGate
          if (!pending || !enterOn) return
          const outcome = await enterOn(pending.req, connection)
          exchange.pendingGate = null
          const admitted = settlePending(request, reply, exchange, pending, outcome)
          if (!sameCaller(admitted.caller, pending.speculated)) throw new AdmissionChanged(admitted)
        },
      }
    },

    /**
     * A gate still pending (an `inWrite` entry whose transaction never sent it: the body failed, or the handler
     * ended before its transaction), run on its own: its refusal is thrown, as it would have been before the body
     * was read. Returns who was admitted (null when no gate was pending).
     */
    async meetPending(request: FastifyRequest, reply: FastifyReply, exchange: Exchange): Promise<Admitted | null> {
      const pending = exchange.pendingGate
      if (!pending) return null
      exchange.pendingGate = null
      return settlePending(request, reply, exchange, pending, await deps.gate.enter(pending.req))
    },

    /** Step 2; null when the client went away meanwhile (the request is then hijacked: nothing more runs). */
    async enter(def: RouteDef, request: FastifyRequest, reply: FastifyReply, exchange: Exchange): Promise<Entry | null> {
      // Route parameters and query strings may not carry text the store cannot keep (`%00`), whatever the route.
      assertStorableParameters(request.params, '/path', 'A route parameter')
      assertStorableParameters(request.query ?? {}, '/query', 'A query parameter')
      const params = def.params ? (parseOrThrow(def.params, request.params, '/path', 'A route parameter') as Record<string, unknown>) : {}
      const query = def.query
        ? (parseOrThrow(def.query, request.query ?? {}, '/query', 'A query parameter') as Record<string, unknown>)
        : {}
      if (def.auth.kind === 'admin') assertOperatorToken(request.headers.authorization, deps.adminTokenDigest)
      if (def.auth.kind !== 'api_key') {
        checkMediaType(def, request)
        return { params, query, gate: { admitted: null } }
      }
      const clientCode = String(params.clientCode)
      const digest = presentedKeyDigest(request.headers.authorization, deps.environment)
      const gateRequest: GateRequest = { digest, environment: deps.environment, clientCode, log: request.log }
      // A request whose whole work is one read: its gate runs in that read's statement (one round trip in all).
      if (def.oneRead && deps.gate.enterWithRead) return { params, query, gate: { inRead: gateRequest } }
      // A write of a caller admitted last time: its gate leaves with its transaction's BEGIN (step 3).
      const speculated = def.gateInWrite && deps.gate.enterOn ? remembered.lastAdmitted(gateRequest) : undefined
      if (speculated) {
        const admitted = speculate(def, request, clientCode, speculated)
        if (admitted) {
          exchange.pendingGate = { def, req: gateRequest, clientCode, speculated }
          return { params, query, gate: { inWrite: admitted } }
        }
      }
      // One round trip: the key and its grant, the minute's count, a slot in every bucket (src/http/limits.ts).
      const outcome = await deps.gate.enter(gateRequest)
      if (!outcome.caller) throw invalidKey()
      exchange.slot.hold(outcome.lease)
      // Closed while the gate ran: its 'close' found no slot to give back, so give it back now.
      if (exchange.slot.closed) {
        await abandon(request, reply, exchange, 'gate')
        return null
      }
      return { params, query, gate: { admitted: admit(def, request, reply, exchange, clientCode, outcome) } }
    },

    /**
     * Step 3 for a one-read route: its read, with the gate where the entry says the gate runs in it. Returns who
     * was admitted and what the read returned; on any other route, who `enter` admitted and nothing read.
     */
    async read(
      def: RouteDef,
      request: FastifyRequest,
      reply: FastifyReply,
      exchange: Exchange,
      entry: Entry,
    ): Promise<{ admitted: Admitted | null; read: unknown }> {
      const gate = entry.gate
      if (!def.oneRead) return { admitted: 'admitted' in gate ? gate.admitted : 'inWrite' in gate ? gate.inWrite : null, read: undefined }
      const clientCode = String(entry.params.clientCode ?? '')
      const args = { clientCode, params: entry.params, query: entry.query }
      if ('admitted' in gate) return { admitted: gate.admitted, read: await def.oneRead(oneStatement(deps.db, def.operationId), args) }
      if ('inWrite' in gate) throw new Error('a one-read route never has its gate in a write')

      const req = gate.inRead
      const scopes = scopesOf(def)
      const met = { gate: false, admitted: null as Admitted | null }
      // The gate and the read in one statement; the rows are used only once the request is admitted.
      const db = oneStatement(deps.db, def.operationId, async <T extends object>(sql: string, params: readonly unknown[]) => {
        met.gate = true
        const { outcome, rows } = await (deps.gate.enterWithRead as NonNullable<Gate['enterWithRead']>)<T>(req, { sql, params, scopes })
        met.admitted = admit(def, request, reply, exchange, clientCode, outcome)
        return rows
      })
      /** A read that ran no statement: the gate on its own, its slot given back on send or on the exchange's end. */
      const gateAlone = async () => {
        const outcome = await deps.gate.enter(req)
        if (outcome.caller) exchange.slot.hold(outcome.lease)
        // Closed meanwhile: its 'close' found no slot to give back.
        if (exchange.slot.closed) void exchange.slot.release()
        met.admitted = admit(def, request, reply, exchange, clientCode, outcome)
      }
      let read: unknown
      try {
        read = await def.oneRead(db, args)
      } catch (err) {
        // Authentication and the limits answer before anything the read found.
        if (!met.gate) await gateAlone()
        throw err
      }
      if (!met.gate) await gateAlone()
      return { admitted: met.admitted, read }
    },

    /** A route's further scopes that depend on the body (a batch needs each kind's write scope): 403 without them. */
    requireScopes(admitted: Admitted | null, clientCode: string, scopes: readonly Scope[], ip: string): void {
      if (admitted) authorize(admitted.caller, clientCode, scopes, ip)
    },
  }
}

export type Admission = ReturnType<typeof createAdmission>

function scopesOf(def: RouteDef): readonly Scope[] {
  return def.auth.kind === 'api_key' ? def.auth.scopes : []
}
