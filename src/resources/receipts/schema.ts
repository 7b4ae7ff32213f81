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

/** One attempt to deliver a receipt (design.md section 7). */
export const ReceiptDeliveryAttempt = z
  .object({
    attempt: z.number().int().min(1).describe('1 for the first attempt of the receipt, +1 on each retry.'),
    route: z.enum(['vendor_receipt_posting']),
    outcome: z.enum(['delivered', 'failed']),
    httpStatus: z.number().int().optional().describe("The Source's HTTP status; absent when no response came (timeout, refused, DNS)."),
    attemptedAt: Timestamp,
    nextAttemptAt: Timestamp.optional().describe('When a failed attempt is retried (the webhook retry schedule); absent once given up.'),
    receiptId: z.string().describe('The receipt: the same on every retry.'),
    kind: z.enum(['payment', 'refund', 'reversal']),
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
