import { ClientParams } from '../../http/common-schemas.ts'
import { defineRoute, type RouteDef } from '../../http/route.ts'
import { type RouteDeps, writeRoute } from '../operations.ts'
import { InstructionList, InstructionListQuery, InstructionParams, InstructionResponse } from './schema.ts'
import type { RecoveryService } from './service.ts'

const base = '/v1/clients/:clientCode/recovery-instructions'
const path = `${base}/:externalInstructionId`

export function recoveryRoutes(deps: RouteDeps, recovery: RecoveryService): RouteDef[] {
  return [
    writeRoute(deps, recovery.putOperation, {
      method: 'PUT',
      path,
      idParam: 'externalInstructionId',
      params: InstructionParams,
      operationId: 'putRecoveryInstruction',
      summary: 'Authorize or withdraw recovery for one Receivable',
      description:
        'Only for connections in explicit_instruction mode. An authorized instruction is never accepted while the Source holds a restriction or Dispute, and clears no hold other than recovery_not_authorized.',
      tags: ['Recovery instructions'],
      problems: [
        'recovery_mode_mismatch',
        'instruction_revision_conflict',
        'instruction_scope_conflict',
        'instruction_state_conflict',
        'source_restriction_active',
      ],
      answers: { 201: 'Created at revision 1', 200: 'A later revision, or an identical retry' },
    }),
    defineRoute({
      method: 'GET',
      path,
      operationId: 'getRecoveryInstruction',
      summary: 'Read a recovery instruction with its current holds',
      description:
        "Reads a recovery instruction (authorize or withdraw) with its `revision` and the Receivable's current holds, so you can see why recovery is or is not allowed right now.",
      tags: ['Recovery instructions'],
      auth: { kind: 'api_key', scopes: ['recovery_instructions:read'] },
      params: InstructionParams,
      responses: { 200: { schema: InstructionResponse, description: 'The instruction' } },
      problems: ['recovery_instruction_not_found'],
      public: true,
      handler: async ({ clientCode, params }) => ({ status: 200, body: await recovery.get(clientCode, params.externalInstructionId) }),
    }),
    defineRoute({
      method: 'GET',
      path: base,
      operationId: 'listRecoveryInstructions',
      summary: 'List recovery instructions, newest first',
      description:
        'The recovery instructions of this client, most recently created first (a later revision does not move one), each exactly as its GET shows it, with the current holds of its Receivable; `externalReceivableId` keeps the one governing that Receivable. Pages of `limit` items (1 to 200, default 50): pass `nextCursor` as `cursor` for the next page, until it is null.',
      tags: ['Recovery instructions'],
      auth: { kind: 'api_key', scopes: ['recovery_instructions:read'] },
      params: ClientParams,
      query: InstructionListQuery,
      responses: { 200: { schema: InstructionList, description: 'A page of recovery instructions, newest first' } },
      problems: [],
      public: true,
      handler: async ({ clientCode, query }) => ({ status: 200, body: await recovery.list(clientCode, query) }),
    }),
  ]
}
