import { defineRoute, type RouteDef } from '../../http/route.ts'
import { BalanceSnapshot, BalanceSnapshotParams, BalanceSnapshotWrite } from './schema.ts'
import type { SnapshotService } from './service.ts'

const path = '/v1/clients/:clientCode/balance-snapshots/:externalSnapshotId'

export function snapshotRoutes(snapshots: SnapshotService): RouteDef[] {
  return [
    defineRoute({
      method: 'PUT',
      path,
      operationId: 'putBalanceSnapshot',
      summary: 'Record an ordered Source balance snapshot',
      tags: ['Balance snapshots'],
      auth: { kind: 'api_key', scopes: ['receivables:write'] },
      params: BalanceSnapshotParams,
      body: { schema: BalanceSnapshotWrite, mediaType: 'application/json' },
      responses: {
        201: { schema: BalanceSnapshot, description: 'Accepted, with each balance outcome' },
        200: { schema: BalanceSnapshot, description: 'An identical retry' },
      },
      problems: ['feed_mode_mismatch', 'snapshot_out_of_order', 'snapshot_conflict'],
      public: true,
      handler: async ({ clientCode, grant, params, body, slot }) => snapshots.put(clientCode, grant, params.externalSnapshotId, body, slot),
    }),
    defineRoute({
      method: 'GET',
      path,
      operationId: 'getBalanceSnapshot',
      summary: 'Read a balance snapshot',
      tags: ['Balance snapshots'],
      auth: { kind: 'api_key', scopes: ['receivables:read'] },
      params: BalanceSnapshotParams,
      responses: { 200: { schema: BalanceSnapshot, description: 'The snapshot' } },
      problems: ['financial_event_not_found'],
      public: true,
      oneRead: (db, { clientCode, params }) => snapshots.get(clientCode, params.externalSnapshotId, db),
      handler: async ({ read }) => ({ status: 200, body: read }),
    }),
  ]
}
