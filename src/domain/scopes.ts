/** Scopes a grant can hold: the specification's seen scopes plus the scopes docs/design/tenancy-and-credentials.md adds. */
export const SCOPES = [
  'customers:read',
  'customers:write',
  'receivables:read',
  'receivables:write',
  'payment_observations:read',
  'payment_observations:write',
  'financial_corrections:read',
  'financial_corrections:write',
  'recovery_instructions:read',
  'recovery_instructions:write',
  'payment_requests:read',
  'payment_requests:write',
  'webhooks:manage',
] as const

export type Scope = (typeof SCOPES)[number]
