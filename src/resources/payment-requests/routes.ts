import { ClientParams } from '../../http/common-schemas.ts'
import { defineRoute, type RouteDef } from '../../http/route.ts'
import { executeWrite, type RouteDeps, writeRoute } from '../operations.ts'
import { canceledAtPayTime } from './payment-rules.ts'
import { PaymentRequestListQuery, PaymentRequestParams, type PaymentRequestResponse, ReceiptDelivery } from './schema.ts'
import type { PaymentRequestService } from './service.ts'

const base = '/v1/clients/:clientCode/payment-requests'
const path = `${base}/:externalPaymentRequestId`

export function paymentRequestRoutes(deps: RouteDeps, requests: PaymentRequestService): RouteDef[] {
  return [
    writeRoute(deps, requests.putOperation, {
      method: 'PUT',
      path,
      idParam: 'externalPaymentRequestId',
      params: PaymentRequestParams,
      operationId: 'putPaymentRequest',
      summary: 'Ask the debtor of a Receivable for a fixed amount through a hosted payment page',
      description:
        'Answers 201 with hostedUrl, the page the debtor pays on; an identical retry answers 200 with the current state. expiresAt defaults to 7 days ahead and must lie between 5 minutes and 30 days ahead. Refused with 409 recovery_held (listing `holds`) while the Receivable has any hold.',
      tags: ['Payment requests'],
      answers: { 201: 'Created, status open', 200: 'An identical retry: the current state' },
      problems: ['payment_request_conflict', 'recovery_held'],
    }),
    writeRoute(deps, requests.cancelOperation, {
      method: 'POST',
      path: `${path}/cancel`,
      idParam: 'externalPaymentRequestId',
      params: PaymentRequestParams,
      operationId: 'cancelPaymentRequest',
      summary: 'Cancel an open Payment request',
      description:
        'An open request becomes canceled (final) with cancelReason requested, and no longer reserves its amount; the hosted page then says it was canceled. The body ({reason?}) may be empty or absent. A canceled request answers 200 unchanged; any other status 409 payment_request_state_conflict.',
      tags: ['Payment requests'],
      optionalBody: true,
      answers: { 200: 'Canceled, or already canceled (unchanged)' },
      problems: ['payment_request_not_found', 'payment_request_state_conflict'],
    }),
    // A read that may record a passed expiry: the operation's transaction and answer (executeWrite).
    defineRoute({
      method: 'GET',
      path,
      operationId: 'getPaymentRequest',
      summary: 'Read a Payment request with its Payment, if the provider has decided',
      description:
        'The request as it stands: open, confirmed, failed, expired (recorded by this read once expiresAt has passed) or canceled with its cancelReason. payment is null until the provider decides; a confirmed Payment shows what it allocated to the Receivable, what it could not (refunded automatically), and what refunds and reversals took back.',
      tags: ['Payment requests'],
      auth: { kind: 'api_key', scopes: requests.getOperation.scopes },
      params: PaymentRequestParams,
      responses: { 200: { schema: requests.getOperation.response, description: 'The Payment request' } },
      problems: ['payment_request_not_found'],
      public: true,
      handler: ({ clientCode, grant, params, slot }) =>
        executeWrite(deps, requests.getOperation, { clientCode, grant, id: params.externalPaymentRequestId }, undefined, slot),
    }),
    // Like the GET, it may record passed expiries of the requests it lists: the operation's transaction and answer.
    defineRoute({
      method: 'GET',
      path: base,
      operationId: 'listPaymentRequests',
      summary: 'List Payment requests, newest first',
      description:
        'The Payment requests of this client, most recently created first (a later status change does not move one), each exactly as its GET shows it, with its Payment; `externalReceivableId` keeps those of one Receivable, `status` those in one status (a request past its expiresAt is expired, never open). Pages of `limit` items (1 to 200, default 50): pass `nextCursor` as `cursor` for the next page, until it is null.',
      tags: ['Payment requests'],
      auth: { kind: 'api_key', scopes: requests.listOperation.scopes },
      params: ClientParams,
      query: PaymentRequestListQuery,
      responses: { 200: { schema: requests.listOperation.response, description: 'A page of Payment requests, newest first' } },
      problems: [],
      public: true,
      handler: ({ clientCode, grant, query, slot }) =>
        executeWrite(deps, requests.listOperation, { clientCode, grant, id: '' }, query, slot),
    }),
    defineRoute({
      method: 'GET',
      path: `${path}/receipt-delivery`,
      operationId: 'getReceiptDelivery',
      summary: 'Read who delivers the receipt of a confirmed Payment, and its accounting acknowledgement',
      description:
        "deliveryOwner is the connection's receiptDeliveryOwner. With owner `service` and a verified receipt route, capability is enabled and deliveryAttempts lists every signed receipt attempt; otherwise capability says why nothing is delivered (owner partner, no_verified_route, an unverified route with its missing proof, or a disabled route). A delivery never acknowledges: the acknowledgement is derived only from receipt lines matched by payment reconciliations.",
      tags: ['Payment requests'],
      auth: { kind: 'api_key', scopes: ['payment_requests:read'] },
      params: PaymentRequestParams,
      responses: { 200: { schema: ReceiptDelivery, description: 'Delivery and acknowledgement' } },
      problems: ['payment_request_not_found', 'payment_not_confirmed'],
      public: true,
      handler: async ({ clientCode, grant, params }) => ({
        status: 200,
        body: await requests.receiptDelivery(clientCode, grant, params.externalPaymentRequestId),
      }),
    }),
  ]
}

/**
 * The sandbox provider's confirmation, for operators (served with the operator API): absent in production,
 * as it would be on a live provider, so there it answers 404 route_not_found. The hosted page's form runs the
 * same operation (confirmOperation).
 */
export function paymentSimulateRoutes(deps: RouteDeps, requests: PaymentRequestService, opts: { sandbox: boolean }): RouteDef[] {
  if (!opts.sandbox) return []
  const simulate = writeRoute(deps, requests.confirmOperation, {
    method: 'POST',
    path: '/admin/v1/clients/:clientCode/payment-requests/:externalPaymentRequestId/simulate',
    idParam: 'externalPaymentRequestId',
    params: PaymentRequestParams,
    operationId: 'adminSimulatePayment',
    summary: 'Confirm, fail or reverse a Payment request through the sandbox provider',
    description:
      'Sandbox only. 201 when it recorded the Payment, 200 when the same outcome was already recorded. Refused with 409 recovery_held while the Receivable has any hold. When the amount no longer fits the working amount less the open requests made before it, the request is canceled (balance_changed, committed), nothing is charged, and the answer is 409 payment_request_state_conflict saying so. Outcome reversed (a confirmed Payment; optional amount, default what remains after refunds pending or succeeded and reversals) records that the provider took money back: 200 with reversedAmount, the effect of a refund on balances at once, event payment.reversed; 409 payment_not_confirmed without a confirmed Payment, 422 at /amount/amount above what remains.',
    tags: ['Operator'],
    answers: { 201: 'The Payment was recorded', 200: 'The same outcome was already recorded, or the reversal was recorded' },
    problems: ['payment_request_not_found', 'payment_request_state_conflict', 'recovery_held', 'payment_not_confirmed'],
    auth: 'operator',
  })
  return [
    {
      ...simulate,
      // The confirmation answers a request it canceled at pay time with that request (committed); a payment was
      // asked for and none was taken, so the operator is answered 409, after the cancel committed.
      handler: async (ctx) => {
        const answer = await simulate.handler(ctx)
        const request = answer.body as PaymentRequestResponse
        if (request.status === 'canceled') throw canceledAtPayTime(request.amount)
        return answer
      },
    },
  ]
}
