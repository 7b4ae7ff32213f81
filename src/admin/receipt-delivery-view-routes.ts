import { Problem } from '../domain/problems.ts'
import { type Clock, isoNow } from '../domain/time.ts'
import { defineRoute, type RouteDef } from '../http/route.ts'
import { AdminReceiptRoute } from '../resources/receipts/schema.ts'
import { operatorRouteView } from '../resources/receipts/service.ts'
import type { Queryable } from '../store/store.ts'
import { ClientCodeParams } from './schema.ts'
import { findClient } from './store.ts'

/**
 * The operator's view of a client's receipt route (issue 23; docs/operator-api.md "Receipt routes"): read only.
 * The route is the Source's to configure (`PUT /v1/clients/{clientCode}/receipt-route`); the operator sees its
 * state, the grant that governs it, the backlog and the latest attempts, never its secret.
 */
export function receiptRouteAdminRoutes(db: Queryable, clock: Clock): RouteDef[] {
  return [
    defineRoute({
      method: 'GET',
      path: '/admin/v1/clients/:clientCode/receipt-route',
      operationId: 'adminGetReceiptRoute',
      summary: "Read a client's receipt route with its delivery state (never its secret)",
      description:
        'The route as the Source configured it, the grant of the Integration that configured it (which governs delivery), the capability every receipt-delivery read of the client reports, the receipts by status (`pending` is the backlog, `due` what is due now) with the change-feed events not yet looked at, and the latest 20 attempts. 404 `receipt_route_not_found` when the client has none.',
      tags: ['Operator'],
      auth: { kind: 'admin' },
      params: ClientCodeParams,
      responses: { 200: { schema: AdminReceiptRoute, description: 'The route and its delivery state' } },
      problems: ['client_not_found', 'receipt_route_not_found'],
      public: false,
      handler: async ({ params }) => {
        const view = await operatorRouteView(db, params.clientCode, isoNow(clock))
        if (view) return { status: 200, body: view }
        if (!(await findClient(db, params.clientCode))) throw new Problem('client_not_found', `No client ${params.clientCode}.`)
        throw new Problem('receipt_route_not_found', `Client ${params.clientCode} has no receipt route.`)
      },
    }),
  ]
}
