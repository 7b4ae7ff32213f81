import type { components } from './generated/schema.ts'
import { type VerifyWebhookOptions, verifySignedBody, WebhookVerificationError } from './webhooks.ts'

type Schemas = components['schemas']

/** The client's receipt route (`GET /v1/clients/{clientCode}/receipt-route`), and the PUT's answer with its secret. */
export type ReceiptRoute = Schemas['ReceiptRoute']
export type ReceiptRouteWithSecret = Schemas['ReceiptRouteWithSecret']
export type ReceiptRoutePut = Schemas['ReceiptRoutePut']
export type ReceiptRouteConfirm = Schemas['ReceiptRouteConfirm']
/** One attempt to deliver a receipt, as `GET .../payment-requests/{id}/receipt-delivery` lists it. */
export type ReceiptDeliveryAttempt = Schemas['ReceiptDeliveryAttempt']

/**
 * A receipt of money moved for a Payment request: its confirmed Payment (`payment`), a refund that succeeded
 * (`refund`) or a reversal the provider recorded (`reversal`), each once, with its own `receiptId` (the same on
 * every retry: discard one you already posted). `amount` is the money moved; `allocations` the part of it that
 * was applied to (or, for a refund or reversal, taken back from) the Receivable, `unappliedAmount` the rest.
 * A receipt reports a fact; it acknowledges nothing: the acknowledgement still comes from your reconciliation.
 */
export interface MoneyReceipt {
  receiptId: string
  kind: ReceiptDeliveryAttempt['kind']
  externalPaymentRequestId: string
  providerPaymentId: string
  occurredAt: string
  amount: Schemas['Money']
  allocations: { externalReceivableId: string; amount: Schemas['Money'] }[]
  unappliedAmount: Schemas['Money']
}

/**
 * The test receipt the service posts after each `PUT .../receipt-route`: send its `confirmationCode` to
 * `POST .../receipt-route/confirm` to verify the route.
 */
export interface TestReceipt {
  receiptId: string
  kind: 'test'
  occurredAt: string
  confirmationCode: string
}

export type Receipt = MoneyReceipt | TestReceipt

const KINDS: readonly string[] = ['payment', 'refund', 'reversal', 'test']

/**
 * Verifies a receipt the service posted to your receipt route and returns it, typed. The signature is the webhook
 * scheme (`Service-Signature: t=<unix time>,v1=<hex HMAC-SHA256 over "<t>.<raw body>">`, keyed with the route's
 * whole `signingSecret`): the same checks as `verifyWebhook` (constant-time comparison, `t` within
 * `toleranceSeconds` of your clock, 300 by default), then the body must be a receipt. Give it the raw body,
 * before any JSON parsing, and the secret of the route's current configuration (each PUT returns a new one); the
 * header may be given as Node's `req.headers['service-signature']`.
 *
 * Throws WebhookVerificationError with a `reason` (`malformed_body` when the signed body is not a receipt).
 */
export function verifyReceipt(
  rawBody: string | Uint8Array,
  signatureHeader: string | readonly string[] | null | undefined,
  secrets: readonly string[],
  toleranceSeconds = 300,
  options: VerifyWebhookOptions = {},
): Receipt {
  // Node's IncomingHttpHeaders types a header as string | string[]; several values are checked as one header.
  const header = typeof signatureHeader === 'object' && signatureHeader !== null ? signatureHeader.join(',') : signatureHeader
  const body = verifySignedBody('verifyReceipt', rawBody, header, secrets, toleranceSeconds, options)
  const r = body as Partial<Record<string, unknown>> | null
  if (
    typeof r !== 'object' ||
    r === null ||
    Array.isArray(r) ||
    typeof r.receiptId !== 'string' ||
    typeof r.kind !== 'string' ||
    !KINDS.includes(r.kind) ||
    typeof r.occurredAt !== 'string' ||
    (r.kind === 'test' ? typeof r.confirmationCode !== 'string' : typeof r.amount !== 'object' || !Array.isArray(r.allocations))
  ) {
    throw new WebhookVerificationError('malformed_body', 'the signed body is not a receipt')
  }
  return r as unknown as Receipt
}

/** True for a test receipt (its `confirmationCode` verifies the route), false for a receipt of money. */
export function isTestReceipt(receipt: Receipt): receipt is TestReceipt {
  return receipt.kind === 'test'
}
