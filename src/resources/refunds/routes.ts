import { ListQuery } from '../../http/common-schemas.ts'
import { defineRoute, type RouteDef } from '../../http/route.ts'
import { type RouteDeps, writeRoute } from '../operations.ts'
import { RefundList, RefundListParams, RefundParams, RefundResponse } from './schema.ts'
import type { RefundService } from './service.ts'

const base = '/v1/clients/:clientCode/payment-requests/:externalPaymentRequestId/refunds'

export function refundRoutes(deps: RouteDeps, refunds: RefundService): RouteDef[] {
  return [
    writeRoute(deps, refunds.putOperation, {
      method: 'PUT',
      path: `${base}/:externalRefundId`,
      idParam: 'externalRefundId',
      params: RefundParams,
      operationId: 'putRefund',
      summary: "Refund a Payment request's confirmed Payment, in part or in whole",
      description:
        "Answers 201 with the refund `pending`: the provider is asked right after, and decides it `succeeded` or `failed` (events refund.succeeded, refund.failed). Only a succeeded refund moves balances: it takes back unapplied money first, then allocated money, whose return raises the Receivable's workingAmount. An identical retry answers 200 with the current state. Refunds (pending and succeeded) and reversals together never exceed the Payment's amount (422 at /amount/amount). Sandbox: a refund whose amount ends in .13 fails.",
      tags: ['Refunds'],
      answers: { 201: 'Created, status pending', 200: 'An identical retry: the current state' },
      problems: ['payment_request_not_found', 'payment_not_confirmed', 'refund_conflict'],
    }),
    defineRoute({
      method: 'GET',
      path: `${base}/:externalRefundId`,
      operationId: 'getRefund',
      summary: 'Read a refund',
      description:
        "The refund as it stands: pending until the provider decides, then succeeded or failed (final, with decidedAt). Only a succeeded refund has moved balances; the Payment request shows the Payment's refundedAmount. The service's own refund of money a confirmation could not allocate is `unapplied-funds` (reason unapplied_funds).",
      tags: ['Refunds'],
      auth: { kind: 'api_key', scopes: ['payment_requests:read'] },
      params: RefundParams,
      responses: { 200: { schema: RefundResponse, description: 'The refund' } },
      problems: ['payment_request_not_found', 'refund_not_found'],
      public: true,
      handler: async ({ clientCode, params, db }) => ({
        status: 200,
        body: await refunds.get(db, clientCode, params.externalPaymentRequestId, params.externalRefundId),
      }),
    }),
    defineRoute({
      method: 'GET',
      path: base,
      operationId: 'listRefunds',
      summary: 'List the refunds of a Payment request',
      description:
        "Every refund of the Payment request, pending, succeeded or failed, including the service's own `unapplied-funds` refund, in identifier order, paged with the common cursor (limit, cursor; nextCursor is null on the last page). A request with no confirmed Payment lists none.",
      tags: ['Refunds'],
      auth: { kind: 'api_key', scopes: ['payment_requests:read'] },
      params: RefundListParams,
      query: ListQuery,
      responses: { 200: { schema: RefundList, description: 'A page of refunds in identifier order' } },
      problems: ['payment_request_not_found'],
      public: true,
      handler: async ({ clientCode, params, query }) => ({
        status: 200,
        body: await refunds.list(clientCode, params.externalPaymentRequestId, query.cursor, query.limit),
      }),
    }),
  ]
}
