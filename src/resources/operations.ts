import type { z } from 'zod'
import type { Grant } from '../access/grants.ts'
import type { Problem, ProblemCode } from '../domain/problems.ts'
import type { Scope } from '../domain/scopes.ts'
import { type Clock, isoNow } from '../domain/time.ts'
import { defineRoute, type MediaType, type RouteDef } from '../http/route.ts'
import type { Store } from '../store/store.ts'
import { inRequestTransaction, NO_SLOT, type SlotRelease } from '../store/transactions.ts'
import { UnitOfWork } from './unit-of-work.ts'

/**
 * A write, with everything a reader needs to see what it does: one body schema, one scope list, the response
 * schema it answers through, whether it is a Source write (it moves the client's source activity:
 * docs/decisions.md, "The unit of work"), and one `run` that writes through the unit of work it is given. The
 * route and the batch runner both call `runOperation`, so a batch record's httpStatus and problem are exactly
 * what the route would have answered.
 */
export type RecordKind = 'customer' | 'receivable' | 'payment_observation' | 'adjustment' | 'credit_note' | 'write_off'

export interface OperationContext {
  clientCode: string
  /**
   * The calling Integration's grant for the client, already authorized for the operation's scopes; null when an
   * operator (an `operator` write route) or the debtor's hosted page acts, for operations that declare no scopes.
   */
  grant: Grant | null
  /** The resource identity from the path (a batch record's `externalId`). */
  id: string
  /** The path's other parameters, for operations whose resource is named by more than one (a refund of a request). */
  params?: Readonly<Record<string, string>>
  /** An operator acts (an `operator` write route): an operation that audits operator actions records one. */
  operator?: true
  /** The calling API key (an Integration's request): recorded as the actor of the write's feed rows. */
  apiKeyId?: string
}

/** The grant of an operation only an Integration runs (one with scopes): its absence is a programming error. */
export function grantOf(ctx: OperationContext): Grant {
  if (!ctx.grant) throw new Error('this operation runs only for an Integration, with its grant')
  return ctx.grant
}

export interface OperationResult {
  /** 202: the write queued work (a batch), nothing of it accepted yet. */
  status: 200 | 201 | 202
  /**
   * The response, rendered on demand inside the transaction after the flush: a batch record needs only the status.
   * It sends every statement it reads with before it awaits any answer: COMMIT leaves right behind them
   * (`executeWrite`), and a statement sent after it is refused.
   */
  body: () => Promise<unknown>
  /** Told after COMMIT (a queued batch wakes its runner), never inside the transaction and never waited for. */
  afterCommit?: () => void
}

export interface WriteOperation<S extends z.ZodType = z.ZodType> {
  /** The set-based form, for the operations that have one (batch records run through it a wave at a time). */
  many?: SetOperation<z.output<S>>
  /** The batch record kind, for the operations a batch may carry; a name for the others. */
  kind: RecordKind | (string & {})
  scopes: readonly Scope[]
  /**
   * Further scopes the body needs (a batch needs the write scope of each record kind it carries): the route
   * checks them, after the body is valid and before the transaction opens.
   */
  scopesFor?(body: z.output<S>): readonly Scope[]
  body: S
  /** What the write answers; the answer is parsed against it before COMMIT (a misfit rolls the write back). */
  response: z.ZodType
  /** A status whose answer has a schema of its own (a webhook endpoint's 201 shows its secret): `response` otherwise. */
  responses?: Partial<Record<200 | 201 | 202, z.ZodType>>
  /**
   * Work that must hold no connection (a DNS lookup, loading a key ring), run by `executeWrite` before its
   * transaction opens; it may refuse the write (a Problem).
   */
  before?(ctx: OperationContext, body: z.output<S>): Promise<void>
  /** A Source write records that the Source was heard from (lastReceivedAt, and the stale-to-fresh flip). */
  source: boolean
  run(uow: UnitOfWork, ctx: OperationContext, body: z.output<S>): Promise<OperationResult>
}

/**
 * The set-based form of a write (issue 11): an operation takes a list of records. `runMany` validates them in
 * memory, looks up what it needs with one query per table and writes with a handful of multi-row statements.
 * The batch runner hands it one wave of a chunk at a time (src/workers/batch-waves.ts: no two records of a wave
 * touch the same resource, and every dependency of a wave's records is done); a synchronous PUT is a list of
 * one through the same code. A record's outcome is what its synchronous route answers, or `fallback` when a rule
 * is not done set-based (nothing of that record was written): the caller runs it through `run`, alone.
 */
export interface SetRecord<B = unknown> {
  /** The resource identity (the path's id, a batch record's `externalId`). */
  id: string
  body: B
}

export type SetOutcome =
  | { status: 200 | 201; body: () => Promise<unknown> }
  | { problem: Problem }
  /** `state`: what the set-based run already read of the record (its identity locked), for the per-record rules. */
  | { fallback: true; state?: unknown }

export interface SetOperation<B = unknown> {
  /** The resources a record writes and the ones it reads, as `kind:id` keys (the wave plan orders by them). */
  keys(id: string, body: B): { writes: string[]; reads: string[] }
  /**
   * `ctx.locked`: the caller already holds the identity lock of every key the records write (the batch runner
   * locks a whole chunk's in one statement), so the run takes none of its own.
   */
  runMany(
    uow: UnitOfWork,
    ctx: { clientCode: string; grant: Grant; locked?: boolean },
    records: readonly SetRecord<B>[],
    now: string,
  ): Promise<SetOutcome[]>
}

/** A set-based operation's single write: a list of one; a `fallback` runs `single`, the per-record rules. */
export async function runOne<B>(
  many: SetOperation<B>,
  uow: UnitOfWork,
  ctx: OperationContext,
  body: B,
  now: string,
  single: (state: unknown) => Promise<OperationResult>,
): Promise<OperationResult> {
  const [outcome] = await many.runMany(uow, { clientCode: ctx.clientCode, grant: grantOf(ctx) }, [{ id: ctx.id, body }], now)
  if (!outcome) throw new Error('runMany returned no outcome')
  if ('fallback' in outcome) return single(outcome.state)
  if ('problem' in outcome) throw outcome.problem
  return outcome
}

export function defineOperation<S extends z.ZodType>(op: WriteOperation<S>): WriteOperation {
  return op as unknown as WriteOperation
}

/**
 * Runs one write in the caller's unit of work: (1) the operation's own writes, (2) the hold changes it
 * caused (new Receivable revisions and events), and, for a Source write, the source-activity touch, buffered
 * for the flush. The PUT routes, every other write route (through `executeWrite`) and the batch runner (per
 * record, inside a savepoint) all come through here.
 */
export async function runOperation(
  uow: UnitOfWork,
  op: WriteOperation,
  ctx: OperationContext,
  body: unknown,
  now: string,
): Promise<OperationResult> {
  uow.beginOperation()
  const result = await op.run(uow, ctx, body)
  await uow.recordHoldChanges(now)
  if (op.source) uow.touchSource(ctx.clientCode, grantOf(ctx).feedMode, now)
  return result
}

export interface RouteDeps {
  store: Store
  clock: Clock
  /**
   * Told after COMMIT when the write appended change-feed events, with their types (the delivery channels' wake-up:
   * each wakes for the events it concerns; called without types, every channel wakes); never throws.
   */
  onFeedAppended?: (types?: ReadonlySet<string>) => void
}

/**
 * One write in its own transaction, in this order before COMMIT: (1) the operation's writes and (2) its hold
 * changes (runOperation), (3) the source-activity touch with the stale-to-fresh flip it may cause and (4) the
 * change-feed events (the flush), then (5) the response, rendered from what the transaction wrote, (6) the slot's
 * release and COMMIT, all sent together; the response is parsed against the operation's response schema once it
 * arrives. Any of (1)-(6) failing rolls everything back, so "Nothing was saved" is true whenever it is said; a
 * response that does not fit its schema is found after COMMIT left on PostgreSQL, and is then answered as saved.
 */
export async function executeWrite(
  { store, clock, onFeedAppended }: RouteDeps,
  op: WriteOperation,
  ctx: OperationContext,
  body: unknown,
  slot: SlotRelease = NO_SLOT,
): Promise<{ status: 200 | 201 | 202; body: unknown; validated: true }> {
  await op.before?.(ctx, body)
  let appended: ReadonlySet<string> | null = null
  // (6) The request's concurrency slot is freed by this transaction: free exactly when the write commits.
  const { answer, afterCommit } = await inRequestTransaction(store, slot, async (tx, release) => {
    const uow = new UnitOfWork(tx)
    uow.actor = ctx.operator
      ? { type: 'operator' }
      : ctx.grant
        ? { type: 'integration', ...(ctx.apiKeyId ? { ref: ctx.apiKeyId } : {}) }
        : uow.actor
    const result = await runOperation(uow, op, ctx, body, isoNow(clock))
    // (3)-(6) and COMMIT in one round trip: the flush, the response's render, the slot's release and COMMIT are
    // sent together. The answer is then parsed after COMMIT left: should it not fit, the write stands and the store
    // says so (FailedAfterCommitError), never "nothing was saved" (docs/decisions.md, "A write in two round trips").
    const [rendered] = await uow.flushWith(() => Promise.all([result.body(), release()]), tx.commit ? () => tx.commit?.() : undefined)
    if (uow.feedAppended) appended = uow.appendedTypes
    const parsed = (op.responses?.[result.status] ?? op.response).parse(rendered)
    return { answer: { status: result.status, body: parsed, validated: true as const }, afterCommit: result.afterCommit }
  })
  // (7) After COMMIT, told and never waited for: the answer is already decided (the feed's wake-up, the operation's own).
  if (appended) onFeedAppended?.(appended)
  afterCommit?.()
  return answer
}

/** What a write route answers with each status, when the defaults of its method do not say it. */
type Answers = Partial<Record<200 | 201 | 202, string>>
const DEFAULT_ANSWERS: Record<WriteMethod, Answers> = {
  PUT: { 201: 'Created', 200: 'Replaced, or an identical retry' },
  POST: { 200: 'Done, or already done' },
  PATCH: { 200: 'Updated, or a safe no-op' },
  DELETE: { 200: 'Deleted, or already deleted' },
}

type WriteMethod = 'PUT' | 'POST' | 'PATCH' | 'DELETE'

/**
 * The route of a write operation, derived from it: the operation's body schema is the route's, its scopes (with
 * those its body adds, `scopesFor`) the route's authorization, its response schema every success status's, and
 * the handler is `executeWrite` (one transaction, the answer parsed once, before COMMIT). Every write route of the API is one of these (PUTs,
 * PATCHes, commands and resolutions); `auth: 'operator'` makes it an operator route (the admin token, not in the
 * public contract), whose operation runs with no grant.
 */
export function writeRoute(
  deps: RouteDeps,
  op: WriteOperation,
  meta: {
    method: WriteMethod
    path: string
    /** The path parameter naming the resource (the operation's `ctx.id`). */
    idParam: string
    params: z.ZodType
    operationId: string
    summary: string
    description?: string
    tags: string[]
    problems: readonly ProblemCode[]
    /** JSON by default; a merge patch declares `application/merge-patch+json`. */
    mediaType?: MediaType
    /** A command that takes no body may be sent none. */
    optionalBody?: boolean
    /** A command that takes no body declares none (one sent is read as JSON, then ignored). */
    noBody?: boolean
    /** The success statuses and their descriptions; the method's defaults otherwise. */
    answers?: Answers
    auth?: 'operator'
  },
): RouteDef {
  const answers = meta.answers ?? DEFAULT_ANSWERS[meta.method]
  const responses: Record<number, { schema: z.ZodType; description: string }> = {}
  for (const [status, description] of Object.entries(answers))
    responses[Number(status)] = { schema: op.responses?.[Number(status) as 200] ?? op.response, description }
  const operator = meta.auth === 'operator'
  return defineRoute({
    method: meta.method,
    path: meta.path,
    operationId: meta.operationId,
    summary: meta.summary,
    ...(meta.description ? { description: meta.description } : {}),
    tags: meta.tags,
    auth: operator ? { kind: 'admin' } : { kind: 'api_key', scopes: op.scopes },
    params: meta.params,
    ...(meta.noBody
      ? {}
      : { body: { schema: op.body, mediaType: meta.mediaType ?? 'application/json', ...(meta.optionalBody ? { optional: true } : {}) } }),
    responses,
    problems: meta.problems,
    public: !operator,
    // Its gate may leave with its transaction's BEGIN, unless work that holds no connection must run before that
    // transaction opens (a destination's DNS lookup): that work waits for the gate. Further scopes from the body are
    // checked against the caller the handler runs as, and again should the gate return another.
    ...(!operator && !op.before ? { gateInWrite: true as const } : {}),
    handler: async ({ clientCode, grant, apiKeyId, params, body, slot, requireScopes }) => {
      if (op.scopesFor) requireScopes(op.scopesFor(body))
      const path = params as Record<string, unknown>
      const named: Record<string, string> = {}
      for (const [key, value] of Object.entries(path)) named[key] = String(value)
      const ctx: OperationContext = {
        clientCode: operator ? String(path.clientCode) : clientCode,
        grant: operator ? null : grant,
        id: String(path[meta.idParam]),
        params: named,
        ...(operator ? { operator: true as const } : {}),
        ...(!operator && apiKeyId ? { apiKeyId } : {}),
      }
      return executeWrite(deps, op, ctx, body, slot)
    },
  })
}
