import { ClientParams } from '../../http/common-schemas.ts'
import { defineRoute, type RouteDef } from '../../http/route.ts'
import { type RouteDeps, writeRoute } from '../operations.ts'
import { ReceivableList, ReceivableListQuery, ReceivableParams, ReceivableResponse } from './schema.ts'
import type { LifecycleCommand, ReceivableService } from './service.ts'

const base = '/v1/clients/:clientCode/receivables'

const commands: { command: LifecycleCommand; summary: string; description: string }[] = [
  {
    command: 'pause',
    summary: 'Pause a Receivable (active to paused)',
    description:
      'Pauses an active Receivable: recovery stops (hold `other_protection`) until it is resumed. A Receivable in any other state answers 409 `receivable_state_conflict`; the command adds 1 to its `revision`.',
  },
  {
    command: 'resume',
    summary: 'Resume a paused Receivable (paused to active)',
    description:
      "Resumes a paused Receivable: it becomes active again and the pause's hold goes away (other holds stay). Any other state answers 409 `receivable_state_conflict`.",
  },
  {
    command: 'close',
    summary: 'Close a Receivable (active or paused to closed)',
    description:
      'Closes an active or paused Receivable with a reason: it can no longer be collected. A closed one answers 409 `receivable_state_conflict`; reopen it first.',
  },
  {
    command: 'reopen',
    summary: 'Reopen a closed Receivable; recovery is never resumed automatically',
    description:
      'Reopens a closed Receivable: it is active again, but an authorized recovery instruction is suspended, so recovery never resumes by itself (send a new instruction revision). Any other state answers 409 `receivable_state_conflict`.',
  },
]

export function receivableRoutes(deps: RouteDeps, receivables: ReceivableService): RouteDef[] {
  return [
    writeRoute(deps, receivables.put, {
      method: 'PUT',
      path: `${base}/:externalReceivableId`,
      idParam: 'externalReceivableId',
      params: ReceivableParams,
      operationId: 'putReceivable',
      summary: 'Create or replace a Receivable',
      description: 'Importing or updating a Receivable never starts recovery.',
      tags: ['Receivables'],
      problems: ['profile_mismatch', 'stale_source_revision'],
    }),
    defineRoute({
      method: 'GET',
      path: `${base}/:externalReceivableId`,
      operationId: 'getReceivable',
      summary: 'Read a Receivable with its financial position and holds',
      description:
        'Reads one Receivable with its `financialPosition` (source, confirmed-unreconciled, acknowledged and working amounts), its `status` and its `recovery` holds. The working amount is the most any payment request may ask for.',
      tags: ['Receivables'],
      auth: { kind: 'api_key', scopes: ['receivables:read'] },
      params: ReceivableParams,
      responses: { 200: { schema: ReceivableResponse, description: 'The Receivable' } },
      problems: ['receivable_not_found'],
      public: true,
      oneRead: (db, { clientCode, params }) => receivables.get(clientCode, params.externalReceivableId, db),
      handler: async ({ read }) => ({ status: 200, body: read }),
    }),
    defineRoute({
      method: 'GET',
      path: base,
      operationId: 'listReceivables',
      summary: 'List Receivables',
      description:
        "Lists the client's Receivables a page at a time, optionally only those of one `status`; follow `nextCursor` until it is null. Each item is as its GET returns it, holds and financial position included.",
      tags: ['Receivables'],
      auth: { kind: 'api_key', scopes: ['receivables:read'] },
      params: ClientParams,
      query: ReceivableListQuery,
      responses: { 200: { schema: ReceivableList, description: 'A page of Receivables in identifier order' } },
      problems: [],
      public: true,
      handler: async ({ clientCode, query }) => ({ status: 200, body: await receivables.list(clientCode, query) }),
    }),
    ...commands.map(({ command, summary, description }) =>
      writeRoute(deps, receivables.commands[command], {
        method: 'POST',
        path: `${base}/:externalReceivableId/${command}`,
        idParam: 'externalReceivableId',
        params: ReceivableParams,
        operationId: `${command}Receivable`,
        summary,
        description,
        tags: ['Receivables'],
        problems: ['receivable_not_found', 'receivable_state_conflict'],
        answers: { 200: 'The Receivable after the command' },
      }),
    ),
  ]
}
