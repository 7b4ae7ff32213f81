import type { z } from 'zod'
import type { ProblemCode } from '../domain/problems.ts'
import type { Scope } from '../domain/scopes.ts'
import { type Clock, isoNow } from '../domain/time.ts'
import type { Grant } from '../http/auth.ts'
import { defineRoute, type RouteDef } from '../http/route.ts'
import type { Store } from '../store/store.ts'
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
  grant: Grant
  /** The resource identity from the path (a batch record's `externalId`). */
  id: string
}

export interface OperationResult {
  status: 200 | 201
  /** The response, rendered on demand inside the transaction after the flush: a batch record needs only the status. */
  body: () => Promise<unknown>
}

export interface WriteOperation<S extends z.ZodType = z.ZodType> {
  /** The batch record kind, for the operations a batch may carry; a name for the others. */
  kind: RecordKind | (string & {})
  scopes: readonly Scope[]
  body: S
  /** What the write answers; the answer is parsed against it before COMMIT (a misfit rolls the write back). */
  response: z.ZodType
  /** A Source write records that the Source was heard from (lastReceivedAt, and the stale-to-fresh flip). */
  source: boolean
  run(uow: UnitOfWork, ctx: OperationContext, body: z.output<S>): Promise<OperationResult>
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
  if (op.source) uow.touchSource(ctx.clientCode, ctx.grant.feedMode, now)
  return result
}

export interface RouteDeps {
  store: Store
  clock: Clock
}

/**
 * One write in its own transaction, in this order before COMMIT: (1) the operation's writes and (2) its hold
 * changes (runOperation), (3) the source-activity touch with the stale-to-fresh flip it may cause and (4) the
 * change-feed events (the flush), then (5) the response, rendered from what the transaction wrote and parsed
 * against the operation's response schema. Any of them failing rolls everything back, so "Nothing was saved"
 * is true whenever it is said.
 */
export async function executeWrite(
  { store, clock }: RouteDeps,
  op: WriteOperation,
  ctx: OperationContext,
  body: unknown,
): Promise<{ status: 200 | 201; body: unknown }> {
  return store.transaction(async (tx) => {
    const uow = new UnitOfWork(tx)
    const result = await runOperation(uow, op, ctx, body, isoNow(clock))
    await uow.flush()
    return { status: result.status, body: op.response.parse(await result.body()) }
  })
}

/** The PUT route of a write operation: path `{base}/:{idParam}`, 201 created / 200 replaced or retried. */
export function putRoute(
  deps: RouteDeps,
  op: WriteOperation,
  meta: {
    path: string
    idParam: string
    params: z.ZodType
    operationId: string
    summary: string
    tags: string[]
    problems: readonly ProblemCode[]
    description?: string
  },
): RouteDef {
  return defineRoute({
    method: 'PUT',
    path: meta.path,
    operationId: meta.operationId,
    summary: meta.summary,
    ...(meta.description ? { description: meta.description } : {}),
    tags: meta.tags,
    auth: { kind: 'api_key', scopes: op.scopes },
    params: meta.params,
    body: { schema: op.body, mediaType: 'application/json' },
    responses: {
      201: { schema: op.response, description: 'Created' },
      200: { schema: op.response, description: 'Replaced, or an identical retry' },
    },
    problems: meta.problems,
    public: true,
    handler: async ({ clientCode, grant, params, body }) =>
      executeWrite(deps, op, { clientCode, grant, id: String((params as Record<string, unknown>)[meta.idParam]) }, body),
  })
}
