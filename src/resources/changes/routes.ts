import { defineRoute, type RouteDef } from '../../http/route.ts'
import { ChangePage, ChangesParams, ChangesQuery } from './schema.ts'
import type { ChangeService } from './service.ts'

export function changeRoutes(changes: ChangeService): RouteDef[] {
  return [
    defineRoute({
      method: 'GET',
      path: '/v1/clients/:clientCode/changes',
      operationId: 'listChanges',
      summary: 'Read the change feed',
      description:
        'The source of truth for recovery. Events carry identity and revision only; read details with an ordinary GET. A reader sees only the resource types its read scopes cover. Events are kept 30 days.',
      tags: ['Change feed'],
      auth: { kind: 'api_key', scopes: [] },
      params: ChangesParams,
      query: ChangesQuery,
      responses: { 200: { schema: ChangePage, description: 'Events after the cursor, oldest first' } },
      problems: ['cursor_expired'],
      public: true,
      handler: async ({ clientCode, grant, query }) => ({ status: 200, body: await changes.page(clientCode, grant, query) }),
    }),
  ]
}
