import { defineRoute, type RouteDef } from '../../http/route.ts'
import { BatchParams, BatchResponse, BatchWrite } from './schema.ts'
import { type BatchService, type OperationsByKind, scopesForKinds } from './service.ts'

const path = '/v1/clients/:clientCode/batches/:externalBatchId'

export function batchRoutes(batches: BatchService, operations: OperationsByKind): RouteDef[] {
  return [
    defineRoute({
      method: 'PUT',
      path,
      operationId: 'putBatch',
      summary: 'Queue up to 100 records for asynchronous processing',
      description:
        'Needs the write scope of every kind in the batch. 202 acknowledges queued work only, never that a record was accepted; poll the GET. Each record runs exactly as its synchronous PUT would, in array order.',
      tags: ['Batches'],
      auth: { kind: 'api_key', scopes: [] },
      params: BatchParams,
      body: { schema: BatchWrite, mediaType: 'application/json' },
      responses: {
        202: { schema: BatchResponse, description: 'Queued; nothing accepted yet' },
        200: { schema: BatchResponse, description: 'An identical retry: the current state, nothing new queued' },
      },
      problems: ['batch_conflict'],
      public: true,
      handler: async ({ clientCode, grant, params, body, requireScopes, slot }) => {
        requireScopes(scopesForKinds(operations, new Set(body.records.map((r) => r.kind))))
        return batches.submit(clientCode, grant, params.externalBatchId, body, slot)
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
  ]
}
