import { z } from 'zod'
import { HOLD_CATEGORIES } from '../../domain/holds.ts'
import { ExternalId } from '../../domain/identifiers.ts'
import { Timestamp } from '../../domain/time.ts'
import { ClientParams, ListQuery, listResponse } from '../../http/common-schemas.ts'
import { RECEIVABLE_EXAMPLE_ID } from '../demo-examples.ts'

export const MAX_REQUEST_REVISION = 2_147_483_647

const Scope = z.strictObject({ type: z.literal('receivable'), externalReceivableId: ExternalId }).meta({ id: 'InstructionScope' })

/**
 * The Creditor authorizes recovery of the demo Receivable (the demo grant is in explicit_instruction mode).
 * The demo client has collection disabled, so the Receivable stays held by collection_not_enabled.
 */
export const INSTRUCTION_EXAMPLE_ID = 'instr-demo-1'
const instructionWriteExample = {
  scope: { type: 'receivable', externalReceivableId: RECEIVABLE_EXAMPLE_ID },
  state: 'authorized',
  revision: 1,
  effectiveAt: '2026-02-11T09:00:00Z',
} as const

export const InstructionWrite = z
  .strictObject({
    scope: Scope,
    state: z.enum(['authorized', 'withdrawn']),
    revision: z.number().int().min(1).max(MAX_REQUEST_REVISION),
    effectiveAt: Timestamp,
  })
  .meta({
    id: 'RecoveryInstructionWrite',
    description:
      'Revision 1 creates; every later PUT carries exactly the current revision plus 1 (the service also advances it when it suspends).',
    examples: [instructionWriteExample],
  })
export type InstructionWrite = z.output<typeof InstructionWrite>

export const InstructionParams = ClientParams.extend({ externalInstructionId: ExternalId })

export const InstructionResponse = z
  .object({
    externalInstructionId: z.string(),
    scope: z.object({ type: z.literal('receivable'), externalReceivableId: z.string() }),
    state: z.enum(['authorized', 'withdrawn', 'suspended']),
    revision: z.number().int().min(1).max(Number.MAX_SAFE_INTEGER),
    effectiveAt: Timestamp,
    recordedAt: Timestamp,
    recoveryEntryMode: z.literal('explicit_instruction'),
    recoveryHeld: z.boolean(),
    holds: z.array(z.enum(HOLD_CATEGORIES)),
  })
  .meta({
    id: 'RecoveryInstruction',
    examples: [
      {
        externalInstructionId: INSTRUCTION_EXAMPLE_ID,
        ...instructionWriteExample,
        recordedAt: '2026-02-11T09:00:01.350Z',
        recoveryEntryMode: 'explicit_instruction',
        recoveryHeld: true,
        holds: ['collection_not_enabled'],
      },
    ],
  })
export type InstructionResponse = z.output<typeof InstructionResponse>

export const InstructionListQuery = ListQuery.extend({
  externalReceivableId: ExternalId.optional().describe('Only the instruction governing this Receivable (at most one).'),
})
export const InstructionList = listResponse(InstructionResponse, 'RecoveryInstructionList')
