import { ClientParams } from '../../http/common-schemas.ts'
import { defineRoute, type RouteDef } from '../../http/route.ts'
import { type RouteDeps, writeRoute } from '../operations.ts'
import { BatchList, BatchListQuery, BatchParams, BatchResponse } from './schema.ts'
import type { BatchService } from './service.ts'

const base = '/v1/clients/:clientCode/batches'
const path = `${base}/:externalBatchId`

export function batchRoutes(deps: RouteDeps, batches: BatchService): RouteDef[] {
  return [
    writeRoute(deps, batches.submitOperation, {
      method: 'PUT',
      path,
      idParam: 'externalBatchId',
      params: BatchParams,
      operationId: 'putBatch',
      summary: 'Queue up to 100 records for asynchronous processing',
      description:
        'Needs the write scope of every kind in the batch. 202 acknowledges queued work only, never that a record was accepted; poll the GET. Each record runs exactly as its synchronous PUT would, in array order. With `{retryOf}` instead of `records`, queues the records of that earlier, finished batch which ended `failed` or `dependency_failed`, in their order, each with `retriedFrom`: dependencies among them are kept, those on records that succeeded count as met. A retry needs what reading the earlier batch needs (the write scope of every kind it holds); an earlier batch still queued or running answers 409 batch_not_finished, one with nothing to retry 422 at /retryOf.',
      tags: ['Batches'],
      problems: ['batch_conflict', 'batch_not_finished'],
      answers: {
        202: 'Queued; nothing accepted yet',
        200: 'An identical retry: the current state, nothing new queued',
      },
    }),
    defineRoute({
      method: 'GET',
      path,
      operationId: 'getBatch',
      summary: 'Read a batch: progress and exact per-record outcomes',
      description:
        'Needs the write scope of every kind in the batch. A grant lacking the write scope of any record kind gets 403 client_scope_denied for an unknown batch too, so a refusal never tells whether a batch exists; 404 batch_not_found answers only a grant that could read any batch. A failed record carries the problem its synchronous route answered: detail, and errors[] on 422 with pointers into the record body.',
      tags: ['Batches'],
      auth: { kind: 'api_key', scopes: [] },
      params: BatchParams,
      responses: { 200: { schema: BatchResponse, description: 'The batch' } },
      problems: ['batch_not_found'],
      public: true,
      handler: async ({ clientCode, grant, params }) => ({
        status: 200,
        body: await batches.get(clientCode, grant, params.externalBatchId),
      }),
    }),
    defineRoute({
      method: 'GET',
      path: base,
      operationId: 'listBatches',
      summary: 'List the batches this grant may read, newest first',
      description:
        'The batches of this client whose every record kind the grant may write (the rule of the GET), most recently submitted first, each exactly as its GET shows it; a batch holding a kind the grant may not write is left out, as if it did not exist. `status` keeps those in one status. Pages of `limit` items (1 to 200, default 50): pass `nextCursor` as `cursor` for the next page, until it is null. A grant holding no batch write scope at all is refused with 403 client_scope_denied.',
      tags: ['Batches'],
      auth: { kind: 'api_key', scopes: [] },
      params: ClientParams,
      query: BatchListQuery,
      responses: { 200: { schema: BatchList, description: 'A page of batches, newest first' } },
      problems: [],
      public: true,
      handler: async ({ clientCode, grant, query }) => ({ status: 200, body: await batches.list(clientCode, grant, query) }),
    }),
  ]
}
