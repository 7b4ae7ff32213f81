/**
 * The one catalogue of problems. The HTTP status, the title, the `type` URL and every route's documented
 * error responses in the OpenAPI document are all generated from this table, so they cannot drift apart.
 */
export const problemCatalogue = {
  malformed_json: { status: 400, title: 'Malformed JSON' },
  invalid_api_key: { status: 401, title: 'Invalid API key' },
  invalid_admin_token: { status: 401, title: 'Invalid operator token' },
  client_scope_denied: { status: 403, title: 'Client scope denied' },
  route_not_found: { status: 404, title: 'Route not found' },
  customer_not_found: { status: 404, title: 'Customer not found' },
  receivable_not_found: { status: 404, title: 'Receivable not found' },
  financial_event_not_found: { status: 404, title: 'Financial event not found' },
  payment_observation_not_found: { status: 404, title: 'Payment observation not found' },
  payment_request_not_found: { status: 404, title: 'Payment request not found' },
  payment_reconciliation_not_found: { status: 404, title: 'Payment reconciliation not found' },
  refund_not_found: { status: 404, title: 'Refund not found' },
  batch_not_found: { status: 404, title: 'Batch not found' },
  recovery_instruction_not_found: { status: 404, title: 'Recovery instruction not found' },
  client_not_found: { status: 404, title: 'Client not found' },
  integration_not_found: { status: 404, title: 'Integration not found' },
  api_key_not_found: { status: 404, title: 'API key not found' },
  grant_not_found: { status: 404, title: 'Grant not found' },
  payment_provider_not_found: { status: 404, title: 'Payment provider not found' },
  webhook_endpoint_not_found: { status: 404, title: 'Webhook endpoint not found' },
  webhook_delivery_not_found: { status: 404, title: 'Webhook delivery not found' },
  receipt_route_not_found: { status: 404, title: 'Receipt route not found' },
  method_not_allowed: { status: 405, title: 'Method not allowed' },
  batch_conflict: { status: 409, title: 'Batch conflict' },
  contact_update_unsupported: { status: 409, title: 'Contact update unsupported' },
  payment_not_confirmed: { status: 409, title: 'Payment not confirmed' },
  recovery_held: { status: 409, title: 'Recovery held' },
  payment_request_conflict: { status: 409, title: 'Payment request identifier already used with a different body' },
  payment_request_state_conflict: { status: 409, title: 'Payment request state conflict' },
  payment_provider_in_use: { status: 409, title: 'Payment provider in use' },
  payment_provider_not_configured: { status: 409, title: 'Payment provider not configured' },
  refund_conflict: { status: 409, title: 'Refund identifier already used with a different body' },
  payment_reconciliation_conflict: { status: 409, title: 'Reconciliation identifier already used with a different body' },
  reconciliation_not_held: { status: 409, title: 'Reconciliation not held' },
  matching_evidence_incomplete: { status: 409, title: 'Matching evidence incomplete' },
  stale_source_revision: { status: 409, title: 'Stale source revision' },
  financial_event_conflict: { status: 409, title: 'Financial event identifier already used with a different body' },
  payment_observation_conflict: { status: 409, title: 'Payment observation identifier already used with a different body' },
  book_completion_conflict: { status: 409, title: 'Declaration identifier already used with a different body' },
  batches_not_finished: { status: 409, title: 'Batches not finished' },
  batch_not_finished: { status: 409, title: 'Batch not finished' },
  stale_source_position: { status: 409, title: 'Stale source position' },
  snapshot_out_of_order: { status: 409, title: 'Snapshot out of order' },
  snapshot_conflict: { status: 409, title: 'Snapshot identifier already used with a different body' },
  recovery_mode_mismatch: { status: 409, title: 'Recovery entry mode mismatch' },
  instruction_revision_conflict: { status: 409, title: 'Instruction revision conflict' },
  instruction_scope_conflict: { status: 409, title: 'Instruction scope conflict' },
  instruction_state_conflict: { status: 409, title: 'Instruction state conflict' },
  source_restriction_active: { status: 409, title: 'Source restriction or Dispute active' },
  receivable_state_conflict: { status: 409, title: 'Receivable state conflict' },
  feed_mode_mismatch: { status: 409, title: 'Feed mode mismatch' },
  webhook_endpoint_disabled: { status: 409, title: 'Webhook endpoint disabled' },
  sandbox_clock_backwards: { status: 409, title: 'Sandbox clock cannot go backwards' },
  api_key_inactive: { status: 409, title: 'API key inactive' },
  cursor_expired: { status: 410, title: 'Cursor expired' },
  request_too_large: { status: 413, title: 'Request too large' },
  unsupported_media_type: { status: 415, title: 'Unsupported media type' },
  validation_error: { status: 422, title: 'Validation error' },
  profile_mismatch: { status: 422, title: 'Industry profile mismatch' },
  webhook_destination_unsafe: { status: 422, title: 'Webhook destination unsafe' },
  rate_limit_exceeded: { status: 429, title: 'Rate limit exceeded' },
  projection_unavailable: { status: 503, title: 'Projection unavailable' },
  payment_provider_unavailable: { status: 503, title: 'Payment provider unavailable' },
} as const satisfies Record<string, { status: number; title: string }>

export type ProblemCode = keyof typeof problemCatalogue

/** One entry of `errors[]` on a 422: `code` is a Zod 4 issue code or one of the service's field codes. */
export interface FieldError {
  code: string
  detail: string
  pointer: string
}

export class Problem extends Error {
  readonly code: ProblemCode
  readonly status: number
  readonly detail: string
  readonly errors?: FieldError[]
  readonly extensions?: Record<string, unknown>
  readonly headers?: Record<string, string>

  constructor(
    code: ProblemCode,
    detail: string,
    opts: { errors?: FieldError[]; extensions?: Record<string, unknown>; headers?: Record<string, string> } = {},
  ) {
    super(`${code}: ${detail}`)
    this.name = 'Problem'
    this.code = code
    this.status = problemCatalogue[code].status
    this.detail = detail
    if (opts.errors) this.errors = opts.errors
    if (opts.extensions) this.extensions = opts.extensions
    if (opts.headers) this.headers = opts.headers
  }
}

/** A 422 for one field, with the pointer and code the integrator needs to fix it. */
export function fieldProblem(pointer: string, code: string, detail: string): Problem {
  return new Problem('validation_error', `${pointer}: ${detail}`, { errors: [{ code, detail, pointer }] })
}

/** 422 with field code `unknown_reference` at each pointer: a referenced record does not exist. */
export function unknownReferences(refs: { pointer: string; what: string }[]): Problem {
  const errors = refs.map((r) => ({ code: 'unknown_reference', detail: `${r.what} does not exist for this client`, pointer: r.pointer }))
  return new Problem('validation_error', `${refs[0]?.pointer}: ${refs[0]?.what} does not exist for this client`, { errors })
}

export function isProblem(err: unknown): err is Problem {
  return err instanceof Problem
}
