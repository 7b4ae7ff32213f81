import { defineRoute, type RouteDef } from '../../http/route.ts'
import { type RouteDeps, writeRoute } from '../operations.ts'
import { BalanceSnapshot, BalanceSnapshotParams } from './schema.ts'
import type { SnapshotService } from './service.ts'

const path = '/v1/clients/:clientCode/balance-snapshots/:externalSnapshotId'

export function snapshotRoutes(deps: RouteDeps, snapshots: SnapshotService): RouteDef[] {
  return [
    writeRoute(deps, snapshots.putOperation, {
      method: 'PUT',
      path,
      idParam: 'externalSnapshotId',
      params: BalanceSnapshotParams,
      operationId: 'putBalanceSnapshot',
      summary: 'Record an ordered Source balance snapshot',
      description:
        "Records the Source's declared balances for many Receivables at one `sourcePosition`, which must exceed the last accepted snapshot's. Each balance is `applied`, `stale` (its sourceRevision is not newer) or `unknown_receivable`; an applied one redeclares the Receivable's balance.",
      tags: ['Balance snapshots'],
      problems: ['feed_mode_mismatch', 'snapshot_out_of_order', 'snapshot_conflict'],
      answers: { 201: 'Accepted, with each balance outcome', 200: 'An identical retry' },
    }),
    defineRoute({
      method: 'GET',
      path,
      operationId: 'getBalanceSnapshot',
      summary: 'Read a balance snapshot',
      description: 'Reads a balance snapshot with the outcome of each of its balances (`applied`, `stale` or `unknown_receivable`).',
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
