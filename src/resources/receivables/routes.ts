import { ClientParams } from '../../http/common-schemas.ts'
import { defineRoute, type RouteDef } from '../../http/route.ts'
import { type RouteDeps, writeRoute } from '../operations.ts'
import { ReceivableList, ReceivableListQuery, ReceivableParams, ReceivableResponse } from './schema.ts'
import type { LifecycleCommand, ReceivableService } from './service.ts'

const base = '/v1/clients/:clientCode/receivables'

const commands: { command: LifecycleCommand; summary: string }[] = [
  { command: 'pause', summary: 'Pause a Receivable (active to paused)' },
  { command: 'resume', summary: 'Resume a paused Receivable (paused to active)' },
  { command: 'close', summary: 'Close a Receivable (active or paused to closed)' },
  { command: 'reopen', summary: 'Reopen a closed Receivable; recovery is never resumed automatically' },
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
      tags: ['Receivables'],
      auth: { kind: 'api_key', scopes: ['receivables:read'] },
      params: ClientParams,
      query: ReceivableListQuery,
      responses: { 200: { schema: ReceivableList, description: 'A page of Receivables in identifier order' } },
      problems: [],
      public: true,
      handler: async ({ clientCode, query }) => ({ status: 200, body: await receivables.list(clientCode, query) }),
    }),
    ...commands.map(({ command, summary }) =>
      writeRoute(deps, receivables.commands[command], {
        method: 'POST',
        path: `${base}/:externalReceivableId/${command}`,
        idParam: 'externalReceivableId',
        params: ReceivableParams,
        operationId: `${command}Receivable`,
        summary,
        tags: ['Receivables'],
        problems: ['receivable_not_found', 'receivable_state_conflict'],
        answers: { 200: 'The Receivable after the command' },
      }),
    ),
  ]
}
