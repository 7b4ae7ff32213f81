import type { ProblemCode } from '../domain/problems.ts'

/**
 * The text of the page behind every problem `type` (`{DOCS_URL}/problems/<code>`): what causes the problem in
 * this API's terms, how to fix it, and whether sending the identical request again can succeed. Text in
 * backticks is rendered as code. The table must name every code of the catalogue (the typecheck fails
 * otherwise); the routes that answer a code are listed on its page from the route table, not from here.
 */
export interface ProblemPageText {
  cause: string
  fix: string
  retry: string
}

const NEVER = 'Never: the identical request fails the same way every time.'

export const problemDocs = {
  malformed_json: {
    cause:
      'The body of a `PUT`, `POST` or `PATCH` could not be parsed as JSON: a syntax error, an empty body sent with a JSON `Content-Type`, or an object key `__proto__` or `constructor` (refused so that no body can alter object prototypes). The media type and size were fine; the body schema was not looked at yet.',
    fix: 'Serialize the body with a JSON library instead of building it by hand, send it as UTF-8, and rename any `__proto__` or `constructor` key. Nothing was saved.',
    retry: NEVER,
  },
  invalid_api_key: {
    cause:
      'The `Authorization` header of a `/v1` request is missing, is not `Bearer <API key>`, or carries a key that is malformed, unknown, revoked, expired (its `expiresAt` has passed), or issued for the other environment (a sandbox key sent to production, or the reverse). Route parameters are validated first, so a bad path answers `validation_error` before this.',
    fix: 'Send `Authorization: Bearer irk_<environment>_...` with an active key of this deployment. Keys are shown once when the operator creates them (`POST /admin/v1/integrations/{integrationId}/api-keys`); if yours is lost or revoked, ask the operator for a new one.',
    retry: 'Never with the same key: a revoked or wrong key stays refused. Use a valid key.',
  },
  invalid_admin_token: {
    cause:
      'A request to the operator API (`/admin/v1/...`) carried no `Authorization: Bearer <operator token>` header, or the token does not match the one the service stores (only its digest is kept).',
    fix: 'Send the operator token: the `ADMIN_TOKEN` the service was started with, or the one it generated and printed once at first start. The `inbound` CLI reads it from `--token` or `ADMIN_TOKEN`.',
    retry: 'Never with the same token.',
  },
  client_scope_denied: {
    cause:
      "The API key is valid but may not act for this `clientCode`: the key's Integration has no active grant for the client (also answered for a client code that does not exist, so that codes cannot be probed), the grant lacks the route's scope (the `detail` names it), or the calling address is outside the grant's IP allowlist. `GET /changes` answers it when the grant holds no read scope at all. In a batch, a record fails with it when the grant no longer holds the record kind's write scope at the moment the record runs.",
    fix: 'Check the `clientCode` in the path. Otherwise the operator must grant the missing scope or add your address range: `PUT /admin/v1/integrations/{integrationId}/grants/{clientCode}` (or `inbound grant put`). Each route needs the scope listed in the API reference; a batch needs the write scope of every record kind it contains.',
    retry: 'Only after the operator has changed the grant; until then the identical request is refused again.',
  },
  route_not_found: {
    cause:
      'No route of this service has this path, whatever the method: typically a missing `/v1` prefix, a misspelled resource family (`credit-notes`, not `credit_notes`), or an operation this deployment does not implement.',
    fix: 'Compare the path with the API reference at `/docs` or the OpenAPI document at `/v1/openapi.json`, which lists exactly the implemented operations.',
    retry: NEVER,
  },
  method_not_allowed: {
    cause:
      'The path exists, but not with this method: for example `POST` to a resource written with `PUT` (resources are created and replaced by `PUT` at their caller-assigned identifier), or `DELETE`, which no `/v1` route accepts.',
    fix: 'Use one of the methods listed in the `Allow` header of the response.',
    retry: NEVER,
  },
  customer_not_found: {
    cause:
      'There is no Customer with this `externalCustomerId` for this client: on `GET /v1/clients/{clientCode}/customers/{externalCustomerId}`, or on `PATCH`, which changes an existing Customer and never creates one. A Customer of another client answers the same. Identifiers are case-sensitive.',
    fix: 'Create the Customer with `PUT /v1/clients/{clientCode}/customers/{externalCustomerId}` first, or correct the identifier. A Receivable naming an unknown Customer in `responsibleCustomers` answers `validation_error` with field code `unknown_reference` instead.',
    retry: 'Only once the Customer has been created; until then the identical request answers 404 again.',
  },
  receivable_not_found: {
    cause:
      'There is no Receivable with this `externalReceivableId` for this client: on `GET /v1/clients/{clientCode}/receivables/{externalReceivableId}` or on a lifecycle command (`pause`, `resume`, `close`, `reopen`). Identifiers are case-sensitive.',
    fix: 'Create the Receivable with `PUT /v1/clients/{clientCode}/receivables/{externalReceivableId}` first, or correct the identifier. A Receivable named inside a body (a financial event, an allocation, an instruction `scope`) that does not exist answers `validation_error` with field code `unknown_reference` instead.',
    retry: 'Only once the Receivable has been created.',
  },
  financial_event_not_found: {
    cause:
      'No evidence at this URL for this client: an Adjustment, CreditNote or WriteOff on `GET /v1/clients/{clientCode}/adjustments/{externalEventId}`, `/v1/clients/{clientCode}/credit-notes/{externalEventId}` or `/v1/clients/{clientCode}/write-offs/{externalEventId}`; and, as the specification pins it, a complete-book declaration on `GET /v1/clients/{clientCode}/book-completions/{externalCompletionId}` or a balance snapshot on `GET /v1/clients/{clientCode}/balance-snapshots/{externalSnapshotId}`. Each family has its own identifiers: an Adjustment is not found under `credit-notes`.',
    fix: 'Check the identifier and the resource family of the path. If the write that created it got no response, send that write again: an identical retry is safe and answers 200 when it had been accepted.',
    retry: 'Only once the evidence has been written.',
  },
  payment_observation_not_found: {
    cause:
      'There is no payment observation with this `externalEventId` for this client, on `GET /v1/clients/{clientCode}/payment-observations/{externalEventId}`.',
    fix: 'Check the identifier; if the `PUT` that should have created it got no response, send it again (an identical retry is safe).',
    retry: 'Only once the payment observation has been written.',
  },
  payment_request_not_found: {
    cause:
      'There is no Payment request with this `externalPaymentRequestId` for this client: on `GET /v1/clients/{clientCode}/payment-requests/{externalPaymentRequestId}`, on its `receipt-delivery`, and on the operator `simulate` route.',
    fix: 'Create the Payment request with `PUT /v1/clients/{clientCode}/payment-requests/{externalPaymentRequestId}` first, or correct the identifier.',
    retry: 'Only once the Payment request has been created.',
  },
  batch_not_found: {
    cause: 'There is no batch with this `externalBatchId` for this client, on `GET /v1/clients/{clientCode}/batches/{externalBatchId}`.',
    fix: 'Check the identifier. If the `PUT` that submitted the batch got no response, submit it again with the identical body: it answers 202 if it was not stored, or 200 with its current state if it was. A complete-book declaration naming an unknown batch answers `validation_error` with `unknown_reference` at `/batches/<index>`.',
    retry: 'Only once the batch has been submitted.',
  },
  recovery_instruction_not_found: {
    cause:
      'There is no recovery instruction with this `externalInstructionId` for this client, on `GET /v1/clients/{clientCode}/recovery-instructions/{externalInstructionId}`.',
    fix: 'Check the identifier; instructions are created by `PUT /v1/clients/{clientCode}/recovery-instructions/{externalInstructionId}` with `revision` 1.',
    retry: 'Only once the instruction has been created.',
  },
  client_not_found: {
    cause: 'Operator API: `PUT /admin/v1/integrations/{integrationId}/grants/{clientCode}` names a client that has not been created.',
    fix: 'Create the client first with `PUT /admin/v1/clients/{clientCode}` (`inbound client put`), then grant.',
    retry: 'Only once the client exists.',
  },
  integration_not_found: {
    cause:
      'Operator API: an API-key creation (`POST /admin/v1/integrations/{integrationId}/api-keys`) or a grant (`PUT` or `revoke` under `/admin/v1/integrations/{integrationId}/grants/`) names an Integration that has not been created.',
    fix: 'Create the Integration first with `PUT /admin/v1/integrations/{integrationId}` (`inbound integration put`).',
    retry: 'Only once the Integration exists.',
  },
  api_key_not_found: {
    cause:
      'Operator API: `POST /admin/v1/api-keys/{apiKeyId}/revoke` names no API key. The path takes the key id (`ak_...`, returned when the key was created), never the secret key itself.',
    fix: 'Use the `apiKeyId` from the creation response. Revoking a key that is already revoked succeeds and keeps the first revocation time.',
    retry: NEVER,
  },
  grant_not_found: {
    cause:
      'Operator API: `POST /admin/v1/integrations/{integrationId}/grants/{clientCode}/revoke` names an Integration and client between which no grant exists.',
    fix: 'Check both identifiers; a grant is created by `PUT /admin/v1/integrations/{integrationId}/grants/{clientCode}`.',
    retry: 'Only once the grant exists.',
  },
  payment_provider_in_use: {
    cause:
      'Operator API: `DELETE /admin/v1/clients/{clientCode}/payment-provider` while checkout attempts of the client are open or processing at that provider: a debtor may still pay through it, and its events must still be applied. `openCheckouts` in the problem gives the count.',
    fix: 'Wait until the attempts settle (paid, expired or failed), or remove it with `?force=true`: no new payment then goes through it, and its events are still verified and applied until its last attempt settles.',
    retry: 'Yes, once the attempts settled; or at once with `?force=true`.',
  },
  payment_provider_not_configured: {
    cause:
      '`PUT /v1/clients/{clientCode}/payment-requests/{externalPaymentRequestId}` in production for a client without a payment provider: its hosted page could not take the money.',
    fix: "Ask the operator to configure the client's payment provider (`PUT /admin/v1/clients/{clientCode}/payment-provider`, `inbound provider set`), then create the Payment request.",
    retry: 'Only once a payment provider is configured for the client. Nothing was saved.',
  },
  payment_provider_unavailable: {
    cause:
      "The client's payment provider cannot be used from this instance right now: its stored secrets are under an encryption key this instance does not hold (a key rotation not yet rolled out to every instance), so it neither pays nor verifies events. The service does not treat this as 'no provider'.",
    fix: 'Nothing on your side: the operator gives every instance the key (WEBHOOK_SECRET_KEY_PREVIOUS; docs/operations.md). The instance logs one line naming the client.',
    retry: 'Yes: after the `Retry-After` seconds. Nothing was saved or charged.',
  },
  payment_provider_not_found: {
    cause:
      'Operator API: `GET` or `DELETE /admin/v1/clients/{clientCode}/payment-provider` names a client that exists but has no payment provider configured (never configured, or removed).',
    fix: 'Configure one with `PUT /admin/v1/clients/{clientCode}/payment-provider` (`inbound provider set`); check the client code if you expected one.',
    retry: 'Only once a payment provider is configured for the client.',
  },
  batch_conflict: {
    cause:
      '`PUT /v1/clients/{clientCode}/batches/{externalBatchId}` reuses an identifier that already holds a different submission. Bodies are compared as canonical JSON, so key order and number formatting do not count; any other difference in `records` does.',
    fix: 'Give every new batch a new `externalBatchId`. To learn what the existing batch holds and how it went, `GET /v1/clients/{clientCode}/batches/{externalBatchId}`. Resending the identical body is safe and answers 200 with its current state.',
    retry: NEVER,
  },
  contact_update_unsupported: {
    cause:
      "A Customer `PUT` or `PATCH` (or a batch `customer` record) would change the Customer's contacts while at least one existing or submitted contact has no `externalContactId`, so contacts cannot be matched (specification, Customer rule 3). Omitting `contacts` from a `PUT`, or sending them unchanged, is always accepted.",
    fix: 'Give every contact a stable `externalContactId` from the Source and send the complete list: a known id is updated, a new id added, an omitted id deactivated. Contacts first created without ids cannot be changed afterwards; only unchanged contacts are accepted for such a Customer.',
    retry: NEVER,
  },
  payment_not_confirmed: {
    cause:
      '`GET /v1/clients/{clientCode}/payment-requests/{externalPaymentRequestId}/receipt-delivery` on a Payment request that has no provider-confirmed Payment (still open, expired, or its Payment failed), so there is nothing to deliver a receipt for; also `PUT /v1/clients/{clientCode}/payment-reconciliations/{externalReconciliationId}` naming such a Payment request, a refund of one (`PUT .../payment-requests/{externalPaymentRequestId}/refunds/{externalRefundId}`), and the operator sandbox reversal (`simulate` with outcome `reversed`).',
    fix: 'Wait until the Payment request is paid and confirmed by the provider (`GET /v1/clients/{clientCode}/payment-requests/{externalPaymentRequestId}` shows its `status`). In sandbox the operator can confirm it with `POST /admin/v1/clients/{clientCode}/payment-requests/{externalPaymentRequestId}/simulate`.',
    retry: 'Yes, once a Payment has been confirmed; poll the Payment request, not this route, until then.',
  },
  stale_source_revision: {
    cause:
      "The write carries a `sourceRevision` that is not newer than the Receivable's current one (returned in `currentSourceRevision`). On `PUT /v1/clients/{clientCode}/receivables/{externalReceivableId}` a lower revision, or the same revision with a different body, is stale (the same revision with an identical body is an identical retry and answers 200). An Adjustment, CreditNote or WriteOff must carry a revision strictly greater than the Receivable's, because accepting it moves the Receivable to that revision. Balance snapshots do not answer this: a stale balance is reported as outcome `stale`.",
    fix: 'Read the Receivable (`GET /v1/clients/{clientCode}/receivables/{externalReceivableId}`) and decide whether your data is really newer than the Source state the service holds. If it is, send it with the Source revision it has, which must exceed `currentSourceRevision`; if not, drop it.',
    retry: NEVER,
  },
  financial_event_conflict: {
    cause:
      '`PUT` on `/v1/clients/{clientCode}/adjustments/{externalEventId}`, `/v1/clients/{clientCode}/credit-notes/{externalEventId}` or `/v1/clients/{clientCode}/write-offs/{externalEventId}` reuses an identifier already accepted with a different body. Financial events are immutable evidence. Bodies are compared as canonical JSON, the private `staffNote` included; identifiers are per family, so an Adjustment and a CreditNote may share one.',
    fix: 'A correction of an accepted event is a new event with a new `externalEventId` (for example an Adjustment in the opposite `direction`). `GET` the existing event to see what was accepted.',
    retry: NEVER,
  },
  payment_observation_conflict: {
    cause:
      '`PUT /v1/clients/{clientCode}/payment-observations/{externalEventId}` reuses an identifier already accepted with a different body. Payment observations are immutable evidence; bodies are compared as canonical JSON.',
    fix: 'Record a refund or reversal of an observed payment as a new observation with its own `externalEventId` (`type` `refund` or `reversal`, naming `reversesExternalEventId`). `GET` the existing observation to see what was accepted.',
    retry: NEVER,
  },
  book_completion_conflict: {
    cause:
      '`PUT /v1/clients/{clientCode}/book-completions/{externalCompletionId}` reuses an identifier already accepted with a different body (compared as canonical JSON).',
    fix: 'Each declaration is immutable: declare again under a new `externalCompletionId` with a higher `sourcePosition`. `GET` the existing one to see what it declared.',
    retry: NEVER,
  },
  batches_not_finished: {
    cause:
      '`PUT /v1/clients/{clientCode}/book-completions/{externalCompletionId}` lists batches that are still `queued` or `running` (named in `unfinishedBatches`). A declaration covers only Receivables its batches have written, so every listed batch must have finished first.',
    fix: 'Poll each batch with `GET /v1/clients/{clientCode}/batches/{externalBatchId}` until its `status` is `succeeded`, `partially_succeeded` or `failed`, then declare.',
    retry:
      'Yes: the identical request succeeds once every listed batch has finished. Nothing was saved, so it is safe to send again; poll the batches rather than this route.',
  },
  batch_not_finished: {
    cause:
      '`PUT /v1/clients/{clientCode}/batches/{externalBatchId}` with `retryOf` names a batch that is still `queued` or `running`: which of its records failed is not known yet.',
    fix: 'Poll the earlier batch with `GET /v1/clients/{clientCode}/batches/{externalBatchId}` until its `status` is `succeeded`, `partially_succeeded` or `failed`, then send the retry.',
    retry:
      'Yes: the identical request is accepted once the earlier batch has finished. Nothing was saved, so it is safe to send again; poll the earlier batch rather than this route.',
  },
  stale_source_position: {
    cause:
      "`PUT /v1/clients/{clientCode}/book-completions/{externalCompletionId}` carries a `sourcePosition` not greater than the last accepted declaration's (returned in `lastSourcePosition`). Declarations are ordered by the Source's position.",
    fix: 'Declare with the Source position the book was taken at; it must exceed `lastSourcePosition`. If it does not, this book is older than one already declared and should not be declared.',
    retry: NEVER,
  },
  snapshot_out_of_order: {
    cause:
      "`PUT /v1/clients/{clientCode}/balance-snapshots/{externalSnapshotId}` carries a `sourcePosition` not greater than the last accepted snapshot's (returned in `lastSourcePosition`). Snapshots are applied in Source order only.",
    fix: 'Send snapshots in increasing `sourcePosition`. A snapshot older than one already accepted carries nothing new: drop it.',
    retry: NEVER,
  },
  snapshot_conflict: {
    cause:
      '`PUT /v1/clients/{clientCode}/balance-snapshots/{externalSnapshotId}` reuses an identifier already accepted with a different body (compared as canonical JSON). Snapshots are immutable.',
    fix: 'Send a new snapshot under a new `externalSnapshotId` with a higher `sourcePosition`. `GET` the existing one to see what was applied.',
    retry: NEVER,
  },
  recovery_mode_mismatch: {
    cause:
      "`PUT /v1/clients/{clientCode}/recovery-instructions/{externalInstructionId}` on a connection whose grant has `recoveryEntryMode` `approved_rules`. Recovery instructions are accepted only from connections in `explicit_instruction` mode (specification, endpoint rule 6). It is a 409 because nothing in the body is wrong: it conflicts with the connection's configuration.",
    fix: "Either stop sending instructions on this connection, or have the operator set the grant's `recoveryEntryMode` to `explicit_instruction` (`PUT /admin/v1/integrations/{integrationId}/grants/{clientCode}`).",
    retry: 'Only after the grant has been changed.',
  },
  instruction_revision_conflict: {
    cause:
      "`PUT /v1/clients/{clientCode}/recovery-instructions/{externalInstructionId}` carries a `revision` other than the next one: a new instruction starts at 1, and every later write must be the current revision plus exactly 1. The same revision with a different `state` or `effectiveAt` is also refused. `expectedRevision` gives the revision the service expects. The service raises an instruction's revision itself when it suspends it (a restriction or Dispute raised, a Receivable reopened), so the Source's count can fall behind.",
    fix: 'Read the instruction (`GET /v1/clients/{clientCode}/recovery-instructions/{externalInstructionId}`), check its `state`, and send the change with `revision` equal to `expectedRevision`.',
    retry: NEVER,
  },
  instruction_scope_conflict: {
    cause:
      '`PUT /v1/clients/{clientCode}/recovery-instructions/{externalInstructionId}` would break "one instruction governs one Receivable": the instruction already governs another Receivable (its `scope` cannot change), or the Receivable is already governed by another instruction (named in `externalInstructionId`).',
    fix: "Keep writing the existing instruction with its next revision; to change the Receivable an instruction governs, use that Receivable's own instruction.",
    retry: NEVER,
  },
  instruction_state_conflict: {
    cause:
      '`PUT /v1/clients/{clientCode}/recovery-instructions/{externalInstructionId}` asks, at the next revision, for a transition the state table does not allow: `authorized` to `authorized`, `withdrawn` to `withdrawn`, or `suspended` to `withdrawn` (`currentState` gives the current state). A suspended instruction can only be authorized again.',
    fix: 'Read the instruction and send only a state it can move to: `authorized` to `withdrawn`, `withdrawn` to `authorized`, `suspended` to `authorized`.',
    retry: NEVER,
  },
  source_restriction_active: {
    cause:
      '`PUT /v1/clients/{clientCode}/recovery-instructions/{externalInstructionId}` with `state` `authorized` while the Source holds a restriction or Dispute on the Receivable or on one of its responsible Customers (listed in `holds`). An authorized instruction is never accepted over a Source restriction.',
    fix: 'Clear the restriction or Dispute in the Source and send the Customer or Receivable again without it; then send the instruction. The refused revision was not used, so send the same revision.',
    retry: 'Yes, once the restriction or Dispute has been cleared; until then it is refused again.',
  },
  receivable_state_conflict: {
    cause:
      "A lifecycle command does not apply to the Receivable's current `status` (returned in `currentStatus`): `pause` needs `active`, `resume` needs `paused`, `close` needs `active` or `paused`, `reopen` needs `closed`. Commands are not idempotent: repeating one that succeeded answers this.",
    fix: 'Read the Receivable before deciding. If `currentStatus` is already the state you asked for, an earlier command (perhaps one whose response was lost) did it: treat that as done.',
    retry: NEVER,
  },
  feed_mode_mismatch: {
    cause:
      "The write does not fit the connection's `feedMode`: a balance snapshot whose `feedMode` differs from the grant's, or an Adjustment, CreditNote or WriteOff sent on a `snapshot_only` connection (such a connection reports balances only through snapshots).",
    fix: "Send what the connection's feed mode expects, or have the operator change the grant's `feedMode` (`PUT /admin/v1/integrations/{integrationId}/grants/{clientCode}`).",
    retry: 'Only after the grant has been changed.',
  },
  cursor_expired: {
    cause:
      '`GET /v1/clients/{clientCode}/changes?after=<cursor>` with a cursor older than the retention of the change feed: events are kept 30 days, and some after this cursor have been purged, so following it would silently skip changes.',
    fix: 'Re-read the current state (`GET /v1/clients/{clientCode}/customers`, `GET /v1/clients/{clientCode}/receivables` and the resources you follow), then follow the feed again without `after`, which starts at the oldest event kept, and store each `nextCursor` as you go.',
    retry: NEVER,
  },
  request_too_large: {
    cause: 'The body of a write is larger than 256 KiB (262144 bytes, uncompressed). The service closes the connection after answering.',
    fix: 'Send less per request: split a batch into several batches (each at most 100 records and 256 KiB).',
    retry: NEVER,
  },
  unsupported_media_type: {
    cause:
      "The body is not of the route's media type: `PUT` and `POST` take `application/json`, `PATCH` takes `application/merge-patch+json`. Also answered for a `Content-Encoding` other than `identity` (compressed bodies are refused), and a charset other than UTF-8.",
    fix: 'Send an uncompressed UTF-8 body with `Content-Type: application/json` (or `application/merge-patch+json` for `PATCH`), and no `Content-Encoding`.',
    retry: NEVER,
  },
  validation_error: {
    cause:
      "A route parameter, query parameter or the body breaks the schema or a field rule. Route parameters are checked before authentication. `errors[]` lists every problem as `{code, detail, pointer}`: `pointer` is a JSON pointer into the body (`/name/firstName`), or `/path/<name>` and `/query/<name>` for parameters; `code` is a Zod issue code (`invalid_type`, `invalid_format`, `unrecognized_keys`, `too_big`, ...) or one of the service's: `custom` (a rule across fields, such as a currency other than that of the Receivable, or a decrease below zero), `unknown_reference` (a named Customer, Receivable or batch does not exist), `sensitive_external_id`, `sensitive_source_reference` (an identifier that looks like an account, card, phone or national number, or an e-mail address).",
    fix: 'Fix each field `errors[]` points at and send again. Nothing was saved. In a batch, records are validated when they run: a failed record shows `httpStatus` 422 and this `problem.type`, and the batch itself is accepted.',
    retry: 'Never unchanged, except after `unknown_reference`: that request succeeds once the referenced record has been created.',
  },
  profile_mismatch: {
    cause:
      "A Receivable `PUT` (or batch `receivable` record) lacks the industry context the grant's `industryProfile` requires: `creditUnion` for `credit_union`, today's only profile. `errors[0].pointer` names it (`/creditUnion`). The profile is fixed by the grant, not chosen per request.",
    fix: 'Add the `creditUnion` object with its required fields (see the Receivable schema in the API reference).',
    retry: NEVER,
  },
  webhook_destination_unsafe: {
    cause:
      '`PUT /v1/clients/{clientCode}/webhook-endpoint` with a `url` that fails the destination checks (`errors[0].detail` says which): it must be `https` on port 443, name a public DNS name (never an IP address in any spelling, nor a special-use name such as `localhost` or `*.internal`), carry no `user:password@` credentials and no `#fragment`, and the name must resolve, only to public addresses (no loopback, private, link-local, CGNAT, multicast, reserved, documentation, unique-local, NAT64 or IPv4-mapped forms of those). The same checks run again before every delivery attempt: a destination that stops passing them disables the endpoint with `disabledReason` `destination_unsafe`. The receipt route (`PUT .../receipt-route`) is checked the same way.',
    fix: 'Expose the receiver at a public `https://` address on port 443 whose name resolves only to public addresses, without credentials or a fragment, and send that `url` (a PUT also re-enables a disabled endpoint). To test delivery on one machine in sandbox, start the service with `WEBHOOK_DEV_ALLOW_LOOPBACK=1`: it then also accepts `http://127.0.0.1:<port>` and `http://localhost:<port>` (the detail of a refused loopback URL says so; refused at start in production).',
    retry: 'Never unchanged, unless the name did not resolve at the time: then once its DNS records are published.',
  },
  rate_limit_exceeded: {
    cause:
      'More than 60 requests in the current calendar minute with this API key (every request counts, `GET` and refused ones included), or a second request while one with the same key is still running (one at a time). In sandbox the same limits also hold per client across all its keys. `RateLimit` and `RateLimit-Policy` headers show the budget on every response.',
    fix: 'Send requests one at a time per key and spread them over the minute; for bulk loads use batches (up to 100 records per request).',
    retry:
      'Yes: wait the number of seconds in the `Retry-After` header (the rest of the minute, or 1 s for the one-at-a-time limit), then send the identical request. Nothing was processed.',
  },
  projection_unavailable: {
    cause:
      'An unexpected error (for example the store becoming unreachable) prevented a safe commit. Every write is one transaction, so nothing was saved. In a batch, a record that met such an error shows `httpStatus` 503 and this `problem.type`.',
    fix: 'Send the identical request again. If it keeps failing, report the `requestId` of the problem to the operator. A batch record that failed this way is not run again by the batch: send it again in a new batch or through its route.',
    retry: 'Yes, with exponential backoff and jitter (for example 1 s, 2 s, 4 s, ... up to a minute). Retries are safe: nothing was saved.',
  },

  recovery_held: {
    cause:
      '`PUT /v1/clients/{clientCode}/payment-requests/{externalPaymentRequestId}` for a Receivable that is held: any hold (no authorized recovery instruction, collection not enabled for the client, a Source restriction or Dispute, a stale Source, paused or closed or flagged by a complete-book declaration, a reconciliation hold) prevents asking the debtor for money. The sandbox provider (the operator `POST /admin/v1/clients/{clientCode}/payment-requests/{externalPaymentRequestId}/simulate` and the form of the hosted page) refuses to settle an open request for such a Receivable the same way. `holds` lists the categories.',
    fix: 'Clear each listed hold where it arises (for example authorize recovery with a recovery instruction, or resolve the reconciliation), then create the Payment request. `GET /v1/clients/{clientCode}/receivables/{externalReceivableId}` shows the current holds.',
    retry: 'Only once no hold remains; until then it is refused again.',
  },
  payment_request_conflict: {
    cause:
      '`PUT /v1/clients/{clientCode}/payment-requests/{externalPaymentRequestId}` reuses an identifier already used with a different body (compared as canonical JSON).',
    fix: 'Create a new Payment request under a new identifier. `GET` the existing one to see what it asks for.',
    retry: NEVER,
  },
  refund_not_found: {
    cause:
      'There is no refund with this `externalRefundId` of this Payment request for this client (`GET /v1/clients/{clientCode}/payment-requests/{externalPaymentRequestId}/refunds/{externalRefundId}`). An unknown Payment request answers `payment_request_not_found` instead.',
    fix: 'Create the refund with `PUT` on the same path first, or correct the identifier; `GET .../refunds` lists the refunds of the Payment request.',
    retry: 'Only once the refund has been created.',
  },
  refund_conflict: {
    cause:
      '`PUT /v1/clients/{clientCode}/payment-requests/{externalPaymentRequestId}/refunds/{externalRefundId}` reuses a refund identifier already used with a different body (compared as canonical JSON). The service names its own refund of unapplied money `unapplied-{externalPaymentRequestId}`: that identifier is taken once the Payment confirmed more than it could allocate.',
    fix: 'Ask for a new refund under a new `externalRefundId`. `GET` the existing one to see its amount, reason and status.',
    retry: NEVER,
  },
  payment_reconciliation_not_found: {
    cause:
      'There is no Payment reconciliation with this `externalReconciliationId` for this client: on its `GET` or on `PUT /v1/clients/{clientCode}/payment-reconciliations/{externalReconciliationId}/resolution`.',
    fix: 'Check the identifier, or create the reconciliation with `PUT /v1/clients/{clientCode}/payment-reconciliations/{externalReconciliationId}` first.',
    retry: 'Only once the reconciliation has been created.',
  },
  payment_reconciliation_conflict: {
    cause:
      '`PUT /v1/clients/{clientCode}/payment-reconciliations/{externalReconciliationId}` reuses an identifier already used with a different body (compared as canonical JSON).',
    fix: 'Send other receipt lines as a new reconciliation under a new identifier. `GET` the existing one to see what it matched.',
    retry: NEVER,
  },
  reconciliation_not_held: {
    cause:
      '`PUT /v1/clients/{clientCode}/payment-reconciliations/{externalReconciliationId}/resolution` on a reconciliation with no held difference: it is `matched`, or already `resolved` with another resolution.',
    fix: 'Read the reconciliation; only a `held` one needs a resolution. An identical retry of the resolution that resolved it answers 200.',
    retry: NEVER,
  },
  payment_request_state_conflict: {
    cause:
      'The operator `POST /admin/v1/clients/{clientCode}/payment-requests/{externalPaymentRequestId}/simulate` (or the sandbox form of the hosted page) asked for an outcome the Payment request can no longer take: it is `expired` or `canceled`, or the provider already decided it the other way (a `confirmed` request cannot fail, a `failed` one cannot be confirmed). The same outcome again is not a conflict: it answers the one Payment already recorded. When the debtor comes to pay a request whose amount no longer fits the Receivable workingAmount less the open requests made before it (a credit note or a new balance since), the request is canceled (`cancelReason` `balance_changed`, committed), nothing is charged, and simulate answers this problem. `POST .../payment-requests/{externalPaymentRequestId}/cancel` answers it for a request that is `confirmed`, `failed` or `expired`: only an open one can be canceled. The sandbox reversal (`simulate` with outcome `reversed` and no amount) answers it when nothing remains of the Payment to reverse (refunds and reversals took it all).',
    fix: 'Read the Payment request: its `status` and `payment` show what the provider decided. Create a new Payment request to ask again.',
    retry: NEVER,
  },
  matching_evidence_incomplete: {
    cause:
      '`PUT /v1/clients/{clientCode}/payment-reconciliations/{externalReconciliationId}/resolution` with `basis` `matching_evidence` while matched receipt lines (across every reconciliation of the Payment) do not yet account for the full allocated amount of every Receivable this reconciliation holds, net of allocated money refunds and reversals took back (that money is no longer there to acknowledge). The `detail` names the Receivables and the amounts still unmatched, and `unmatched` lists them as `{externalReceivableId, allocatedAmount, matchedAmount, unmatchedAmount}`.',
    fix: 'Send the missing receipt lines in a new reconciliation of the same Payment request, then resolve with `matching_evidence`; or resolve with `basis` `authorized_correction` and the Source reference of the correction.',
    retry: 'Only after more lines have matched; until then it is refused again.',
  },
  webhook_delivery_not_found: {
    cause:
      "`POST /v1/clients/{clientCode}/webhook-endpoint/deliveries/{deliveryId}/retry` names no delivery of this Integration's endpoint for the client (delivery records are kept 30 days).",
    fix: 'Take the `deliveryId` from `GET /v1/clients/{clientCode}/webhook-endpoint/deliveries`; for an older event use `POST .../webhook-endpoint/replay` with a change-feed cursor.',
    retry: NEVER,
  },
  webhook_endpoint_disabled: {
    cause:
      '`POST .../webhook-endpoint/deliveries/{deliveryId}/retry` or `POST .../webhook-endpoint/replay` while the endpoint is disabled (by `POST .../disable`, a revoked grant, an unsafe destination, or a signing secret the service can no longer decrypt; `disabledReason` says which), so nothing would be sent.',
    fix: 'Configure the endpoint again with `PUT /v1/clients/{clientCode}/webhook-endpoint` (which re-enables it; with `disabledReason` `signing_secret_unreadable` it also answers a new `signingSecret`, shown once), then retry or replay.',
    retry: 'Only once the endpoint is enabled again.',
  },
  webhook_endpoint_not_found: {
    cause:
      "`GET /v1/clients/{clientCode}/webhook-endpoint` (or `rotate-secret`, `disable`, the delivery log, a delivery retry or a replay) while this Integration has no webhook endpoint configured for the client. Each Integration has its own endpoint per client: another Integration's does not count.",
    fix: 'Configure one with `PUT /v1/clients/{clientCode}/webhook-endpoint`.',
    retry: 'Only once an endpoint has been configured.',
  },
  receipt_route_not_found: {
    cause:
      '`GET /v1/clients/{clientCode}/receipt-route` or `POST .../receipt-route/confirm` while the client has no receipt-posting route configured.',
    fix: 'Configure one with `PUT /v1/clients/{clientCode}/receipt-route`; the service then posts a signed test receipt carrying the confirmation code to send back.',
    retry: 'Only once a route has been configured.',
  },
  sandbox_clock_backwards: {
    cause:
      "Sandbox only. `POST /admin/v1/clients/{clientCode}/sandbox-clock/advance` with a `to` instant before the time the client's clock shows now. A sandbox clock only moves forward: what was recorded at a later time would otherwise lie in the client's future. The `detail` gives the clock's current time, and `now` carries it.",
    fix: 'Read the clock (`GET /admin/v1/clients/{clientCode}/sandbox-clock`) and advance to an instant at or after its `now`, or by a duration. To go back to real time, `POST .../sandbox-clock/reset`; to start the client over, `POST /admin/v1/clients/{clientCode}/sandbox-reset`.',
    retry: NEVER,
  },
  api_key_inactive: {
    cause:
      'Operator API: `POST /admin/v1/api-keys/{apiKeyId}/rotate` names a key that is revoked or has expired. Rotation hands over from a key that still works to a new one; there is nothing left to hand over from.',
    fix: 'Issue a new key instead (`POST /admin/v1/integrations/{integrationId}/api-keys`, `inbound key create`). A key in its grace period after an earlier rotation is still active and can be rotated again.',
    retry: NEVER,
  },
} satisfies Record<ProblemCode, ProblemPageText> & Record<string, ProblemPageText>

/** The page text of a catalogue code. */
export function problemPageText(code: ProblemCode): ProblemPageText {
  return problemDocs[code]
}
