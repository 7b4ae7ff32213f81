import { ClientParams } from '../../http/common-schemas.ts'
import { defineRoute, type RouteDef } from '../../http/route.ts'
import type { Store } from '../../store/store.ts'
import { CollectionSummary, type createCollectionSummary } from './service.ts'

export function collectionRoutes(store: Store, summary: ReturnType<typeof createCollectionSummary>): RouteDef[] {
  return [
    defineRoute({
      method: 'GET',
      path: '/v1/clients/:clientCode/collection-summary',
      operationId: 'getCollectionSummary',
      summary: 'Counts and amounts by status and currency, and held counts by category',
      description:
        "Counts and amounts of the client's Receivables by status and currency, and how many are held in each hold category. A dashboard's one call.",
      tags: ['Collection summary'],
      auth: { kind: 'api_key', scopes: ['receivables:read'] },
      params: ClientParams,
      responses: { 200: { schema: CollectionSummary, description: 'The summary, computed now' } },
      problems: [],
      public: true,
      handler: async ({ clientCode }) => ({ status: 200, body: await summary(store, clientCode) }),
    }),
  ]
}
