import type { z } from 'zod'
import type { ProblemCode } from '../domain/problems.ts'
import type { Scope } from '../domain/scopes.ts'
import { type Clock, isoNow } from '../domain/time.ts'
import type { Grant } from '../http/auth.ts'
import { defineRoute, type RouteDef } from '../http/route.ts'
import type { Store, Tx } from '../store/store.ts'
import { touchSourceActivity } from './freshness/service.ts'

/**
 * A Source write that can arrive alone (its PUT route) or as a batch record: one schema, one scope list,
 * one `run` inside a transaction it is given. The route and the batch runner both call `run`, so a batch
 * record's httpStatus and problem are exactly what the route would have answered.
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
  /** The response, rendered on demand inside the transaction: a batch record needs only the status. */
  body: () => Promise<unknown>
}

export interface WriteOperation<S extends z.ZodType = z.ZodType> {
  kind: RecordKind
  scopes: readonly Scope[]
  body: S
  run(tx: Tx, ctx: OperationContext, body: z.output<S>): Promise<OperationResult>
}

export function defineOperation<S extends z.ZodType>(op: WriteOperation<S>): WriteOperation {
  return op as unknown as WriteOperation
}

/**
 * Runs a Source write exactly as every caller must: the operation, then the record that the Source was
 * heard from (source freshness), in the caller's transaction. The PUT route and the batch runner both
 * come through here.
 */
export async function runOperation(
  tx: Tx,
  op: WriteOperation,
  ctx: OperationContext,
  body: unknown,
  now: string,
): Promise<OperationResult> {
  const result = await op.run(tx, ctx, body)
  touchSourceActivity(tx, ctx.clientCode, ctx.grant.feedMode, now)
  return result
}

/** The PUT route of a write operation: path `{base}/:{idParam}`, 201 created / 200 replaced or retried. */
export interface RouteDeps {
  store: Store
  clock: Clock
}

export function putRoute(
  { store, clock }: RouteDeps,
  op: WriteOperation,
  meta: {
    path: string
    idParam: string
    params: z.ZodType
    operationId: string
    summary: string
    tags: string[]
    response: z.ZodType
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
      201: { schema: meta.response, description: 'Created' },
      200: { schema: meta.response, description: 'Replaced, or an identical retry' },
    },
    problems: meta.problems,
    public: true,
    handler: async ({ clientCode, grant, params, body }) => {
      const id = String((params as Record<string, unknown>)[meta.idParam])
      return store.transaction(async (tx) => {
        const result = await runOperation(tx, op, { clientCode, grant, id }, body, isoNow(clock))
        // The response is rendered (and checked against its schema) as the very last work before COMMIT,
        // after the freshness flip and every other commit hook: it shows exactly what commits, and a
        // response that does not fit its schema rolls the write back instead of answering 503 after it.
        const answer: { status: 200 | 201; body: unknown } = { status: result.status, body: undefined }
        tx.beforeCommit(async () => {
          answer.body = meta.response.parse(await result.body())
        }, 'final')
        return answer
      })
    },
  })
}
