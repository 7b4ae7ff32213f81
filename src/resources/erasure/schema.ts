import { z } from 'zod'
import { Timestamp } from '../../domain/time.ts'

export const ErasureResponse = z
  .object({
    externalCustomerId: z.string(),
    status: z.enum(['pending', 'done']).describe('`pending` while the service is still erasing copies; `done` within seconds.'),
    requestedAt: Timestamp,
    erasedAt: Timestamp.nullable().describe('When every copy was erased; null while pending.'),
  })
  .meta({
    id: 'CustomerErasure',
    examples: [{ externalCustomerId: 'cust-gone-1', status: 'pending', requestedAt: '2026-02-01T10:00:00.000Z', erasedAt: null }],
  })
export type ErasureResponse = z.output<typeof ErasureResponse>

/** The erasure takes no body (one sent is read as JSON, then ignored). */
export const NoErasureBody = z.undefined()
