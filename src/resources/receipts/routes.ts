import { defineRoute, type RouteDef } from '../../http/route.ts'
import { type RouteDeps, writeRoute } from '../operations.ts'
import { ReceiptRoute, ReceiptRouteParams } from './schema.ts'
import type { ReceiptService } from './service.ts'

const path = '/v1/clients/:clientCode/receipt-route'
const tags = ['Receipt delivery']

/** The client's receipt-posting route (docs/design/receipt-delivery.md): its writes are WriteOperations served by `writeRoute`. */
export function receiptRoutes(deps: RouteDeps, receipts: ReceiptService): RouteDef[] {
  const { operations } = receipts
  return [
    writeRoute(deps, operations.put, {
      method: 'PUT',
      path,
      idParam: 'clientCode',
      operationId: 'putReceiptRoute',
      summary: "Configure the client's receipt-posting route (vendor_receipt_posting)",
      description:
        'One route per client. Every PUT answers a new `signingSecret` (shown once), leaves the route `unverified`, and has the service post a signed test receipt `{receiptId, kind: "test", occurredAt, confirmationCode}` to the URL (`Service-Signature`, the webhook scheme, under this secret). Sending that code to `POST .../receipt-route/confirm` verifies the route. The URL must be `https` on port 443 with a public DNS name that resolves only to public addresses, with no credentials and no fragment.',
      tags,
      params: ReceiptRouteParams,
      answers: {
        201: 'Configured; the signing secret is shown this once; a test receipt follows',
        200: 'Configured again: a new signing secret (shown this once), unverified until confirmed; a test receipt follows',
      },
      problems: ['webhook_destination_unsafe'],
    }),
    defineRoute({
      method: 'GET',
      path,
      operationId: 'getReceiptRoute',
      summary: "Read the client's receipt-posting route",
      description:
        "Reads the client's receipt-posting route: its `url` and `state` (`unverified` until the Source sends back the test receipt's confirmation code, then `verified`; `disabled` with a reason).",
      tags,
      auth: { kind: 'api_key', scopes: ['payment_requests:read'] },
      params: ReceiptRouteParams,
      responses: { 200: { schema: ReceiptRoute, description: 'The route (never its secret)' } },
      problems: ['receipt_route_not_found'],
      public: true,
      handler: async ({ grant }) => ({ status: 200, body: await receipts.get(grant) }),
    }),
    writeRoute(deps, operations.confirm, {
      method: 'POST',
      path: `${path}/confirm`,
      idParam: 'clientCode',
      operationId: 'confirmReceiptRoute',
      summary: 'Prove the route: send back the confirmation code of the test receipt',
      description:
        'The proof `source_posting_confirmation`: the route becomes `verified`, and with `receiptDeliveryOwner` `service` every Payment confirmed after it is delivered as a signed receipt. A code that is not the one of the current configuration answers 422 `validation_error` (field code `custom` at `/confirmationCode`). Confirming a verified route again changes nothing.',
      tags,
      params: ReceiptRouteParams,
      answers: { 200: 'Verified' },
      problems: ['receipt_route_not_found'],
    }),
  ]
}
