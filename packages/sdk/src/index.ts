/**
 * @inbound-receivables/sdk: a typed client for the Inbound Receivables Service. Every request and response type
 * is generated from the service's OpenAPI document (src/generated/schema.ts) and the problem codes from its
 * problem catalogue (src/generated/problems.ts); calls go through openapi-fetch.
 */

export {
  autoPage,
  type Batch,
  type BatchListQuery,
  type BatchRecord,
  type BatchRecordBodies,
  BatchTimeoutError,
  type BatchWrite,
  type BookCompletionPreview,
  type BookCompletionWrite,
  type ChangeEvent,
  ChangeFeed,
  type ChangeFeedOptions,
  type ChangePage,
  type ClientOptions,
  type ClientPaths,
  createClient,
  FINAL_BATCH_STATUSES,
  type FinancialEventListQuery,
  type InboundClient,
  type ListOptions,
  type Page,
  type Paged,
  type PaymentObservationListQuery,
  type PaymentReconciliationListQuery,
  type PaymentRequestListQuery,
  type RecoveryInstructionListQuery,
  type ResponseData,
  type RunBatchOptions,
  type Schemas,
  SDK_VERSION,
  type SdkMethod,
} from './client.ts'
export { ApiError, isProblemCode, type Problem, ProblemError, problemCodeOf } from './errors.ts'
export { type ProblemCode, problemCatalogue } from './generated/problems.ts'
export type { components, operations, paths } from './generated/schema.ts'
export {
  isTestReceipt,
  type MoneyReceipt,
  type Receipt,
  type ReceiptDeliveryAttempt,
  type ReceiptRoute,
  type ReceiptRouteConfirm,
  type ReceiptRoutePut,
  type ReceiptRouteWithSecret,
  type TestReceipt,
  verifyReceipt,
} from './receipts.ts'
export { isRetryable, parseRetryAfter, type RetryInfo, type RetryOptions } from './retry.ts'
export {
  type VerifyWebhookOptions,
  verifyWebhook,
  type WebhookNotification,
  WebhookVerificationError,
  type WebhookVerificationFailure,
} from './webhooks.ts'
