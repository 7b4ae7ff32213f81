import { z } from 'zod'
import { Timestamp } from '../../domain/time.ts'
import { ClientParams } from '../../http/common-schemas.ts'

export const ReceiptRouteParams = ClientParams

export const ReceiptRoutePut = z
  .strictObject({
    url: z
      .string()
      .min(1)
      .max(2048)
      .describe("The Source's receipt-posting endpoint: `https` on port 443 with a public DNS name, no credentials, no fragment."),
  })
  .meta({ id: 'ReceiptRoutePut', examples: [{ url: 'https://ledger.acme-lending.com/receipts' }] })

export const ReceiptRouteConfirm = z
  .strictObject({
    confirmationCode: z
      .string()
      .min(1)
      .max(200)
      .describe('The `confirmationCode` of the signed test receipt the service posted to the route after its PUT.'),
  })
  .meta({ id: 'ReceiptRouteConfirm', examples: [{ confirmationCode: 'rcc_Xy3mQ0b1Tz8LwA9dFj2kPq' }] })

const routeFields = {
  url: z.string(),
  state: z
    .enum(['unverified', 'verified', 'disabled'])
    .describe(
      '`unverified` until the Source sends back the confirmation code of the test receipt (the proof `source_posting_confirmation`); `verified`: receipts are delivered when the grant says `receiptDeliveryOwner` `service`; `disabled`: nothing is sent, `disabledReason` says why, and a PUT starts over.',
    ),
  verifiedAt: Timestamp.optional().describe('When the Source confirmed the route (kept while a verified route is disabled).'),
  disabledReason: z
    .enum(['grant_revoked', 'destination_unsafe', 'signing_secret_unreadable'])
    .optional()
    .describe(
      'Why the service disabled the route: the grant of the Integration that configured it was revoked, the name now resolves to a non-public address, or the stored signing secret can no longer be decrypted.',
    ),
}

const routeExample = { url: 'https://ledger.acme-lending.com/receipts', state: 'verified', verifiedAt: '2026-02-11T09:01:00.000Z' } as const

export const ReceiptRoute = z.object(routeFields).meta({ id: 'ReceiptRoute', examples: [routeExample] })
export type ReceiptRoute = z.output<typeof ReceiptRoute>

export const ReceiptRouteWithSecret = z
  .object({
    ...routeFields,
    signingSecret: z
      .string()
      .describe(
        'Shown once: store it now. Receipts are signed with it (`Service-Signature`, the webhook scheme); the whole string is the HMAC key.',
      ),
  })
  .meta({
    id: 'ReceiptRouteWithSecret',
    examples: [
      {
        url: 'https://ledger.acme-lending.com/receipts',
        state: 'unverified',
        signingSecret: 'whsec_9fQ2-7wAbCdEfGhIjKlMnOpQrStUvWxYz0123456789',
      },
    ],
  })

/** One attempt to deliver a receipt (docs/design/receipt-delivery.md). */
export const ReceiptDeliveryAttempt = z
  .object({
    attempt: z.number().int().min(1).describe('1 for the first attempt of the receipt, +1 on each retry.'),
    route: z.enum(['vendor_receipt_posting']),
    outcome: z.enum(['delivered', 'failed']),
    httpStatus: z.number().int().optional().describe("The Source's HTTP status; absent when no response came (timeout, refused, DNS)."),
    attemptedAt: Timestamp,
    nextAttemptAt: Timestamp.optional().describe('When a failed attempt is retried (the webhook retry schedule); absent once given up.'),
    receiptId: z.string().describe('The receipt: the same on every retry.'),
    kind: z
      .enum(['payment', 'refund', 'reversal', 'reinstatement'])
      .describe('reinstatement: money a won dispute gave back to the Payment after its reversal.'),
  })
  .meta({
    id: 'ReceiptDeliveryAttempt',
    description: 'One attempt to deliver a receipt of this Payment request to the accounting Source.',
    examples: [
      {
        attempt: 1,
        route: 'vendor_receipt_posting',
        outcome: 'delivered',
        httpStatus: 204,
        attemptedAt: '2026-02-11T09:05:00.000Z',
        receiptId: 'rcpt_3b6f0d0c8a2e4f5a9c1d7e2b4a6c8d0e',
        kind: 'payment',
      },
    ],
  })
export type ReceiptDeliveryAttempt = z.output<typeof ReceiptDeliveryAttempt>

export const ReceiptCapability = z.object({
  state: z.enum(['enabled', 'disabled']).describe('disabled: no delivery attempt will be made.'),
  disabledReason: z
    .enum(['no_verified_route', 'delivery_owner_partner', 'grant_revoked', 'destination_unsafe', 'signing_secret_unreadable'])
    .nullable()
    .describe(
      '`delivery_owner_partner`: the grant says the partner delivers receipts; `no_verified_route`: no receipt route, or one the Source has not confirmed yet (`unverifiedRoutes` says which proof is missing); `grant_revoked`, `destination_unsafe`, `signing_secret_unreadable`: the service disabled the route for this reason (a PUT of the route starts over).',
    ),
  unverifiedRoutes: z.array(z.object({ route: z.enum(['vendor_receipt_posting']), missingProof: z.enum(['source_posting_confirmation']) })),
})
export type ReceiptCapability = z.output<typeof ReceiptCapability>

/** The operator's view of a client's receipt route (`GET /admin/v1/clients/{clientCode}/receipt-route`). */
export const AdminReceiptRoute = z
  .object({
    clientCode: z.string(),
    ...routeFields,
    integrationId: z.string().describe('The Integration that configured the route: its grant governs delivery.'),
    version: z
      .number()
      .int()
      .min(1)
      .describe('1 on the first PUT, +1 on each: a PUT sends a new test receipt and starts verification over.'),
    grant: z
      .object({
        status: z.enum(['active', 'revoked']),
        receiptDeliveryOwner: z.enum(['service', 'partner']),
      })
      .describe("That Integration's grant for the client, as it is now."),
    capability: ReceiptCapability.describe(
      'What every receipt-delivery read of the client says now: `enabled` when receipts are delivered.',
    ),
    receipts: z
      .object({
        pending: z.number().int().min(0).describe('Receipts not delivered yet and still to be tried (the backlog).'),
        due: z.number().int().min(0).describe('Of those, the ones due now (the rest wait for their retry).'),
        delivered: z.number().int().min(0),
        abandoned: z.number().int().min(0).describe('Given up after the last retry of the schedule.'),
        oldestPendingAt: Timestamp.nullable().describe('When the oldest pending receipt was created.'),
        unscannedFeedEvents: z
          .number()
          .int()
          .min(0)
          .describe(
            'Change-feed events committed after what the dispatcher has looked at for receipts (a verified route only): receipts may still come from them.',
          ),
      })
      .describe('Delivery records kept (finished ones for 30 days after their last attempt), test receipts included.'),
    recentAttempts: z
      .array(
        z.object({
          receiptId: z.string(),
          kind: z.enum(['test', 'payment', 'refund', 'reversal', 'reinstatement']),
          externalPaymentRequestId: z.string().nullable(),
          attempt: z.number().int().min(1),
          outcome: z.enum(['delivered', 'failed']),
          httpStatus: z.number().int().nullable(),
          errorClass: z
            .string()
            .nullable()
            .describe('Why an attempt failed: http_status, redirect, timeout, connection_refused, connection_error, tls_error, dns_error.'),
          attemptedAt: Timestamp,
          nextAttemptAt: Timestamp.nullable(),
        }),
      )
      .describe('The latest 20 attempts, newest first.'),
    createdAt: Timestamp,
    updatedAt: Timestamp,
  })
  .meta({
    id: 'AdminReceiptRoute',
    examples: [
      {
        clientCode: 'acme-cu',
        url: 'https://ledger.acme-lending.com/receipts',
        state: 'verified',
        verifiedAt: '2026-02-11T09:01:00.000Z',
        integrationId: 'int-acme-ledger',
        version: 1,
        grant: { status: 'active', receiptDeliveryOwner: 'service' },
        capability: { state: 'enabled', disabledReason: null, unverifiedRoutes: [] },
        receipts: { pending: 2, due: 1, delivered: 311, abandoned: 0, oldestPendingAt: '2026-02-12T08:00:00.000Z', unscannedFeedEvents: 0 },
        recentAttempts: [
          {
            receiptId: 'rcpt_3b6f0d0c8a2e4f5a9c1d7e2b4a6c8d0e',
            kind: 'payment',
            externalPaymentRequestId: 'pr-2026-0117',
            attempt: 2,
            outcome: 'failed',
            httpStatus: 503,
            errorClass: 'http_status',
            attemptedAt: '2026-02-12T08:05:00.000Z',
            nextAttemptAt: '2026-02-12T08:35:00.000Z',
          },
        ],
        createdAt: '2026-02-11T09:00:00.000Z',
        updatedAt: '2026-02-11T09:01:00.000Z',
      },
    ],
  })
export type AdminReceiptRoute = z.output<typeof AdminReceiptRoute>
