import { ClientParams } from '../../http/common-schemas.ts'
import { defineRoute, type RouteDef } from '../../http/route.ts'
import type { Store } from '../../store/store.ts'
import { type Freshness, SourceFreshness } from './service.ts'

export function freshnessRoutes(store: Store, freshness: Freshness): RouteDef[] {
  return [
    defineRoute({
      method: 'GET',
      path: '/v1/clients/:clientCode/source-freshness',
      operationId: 'getSourceFreshness',
      summary: 'How recently the Source was heard from, judged for the caller connection feed mode',
      tags: ['Source freshness'],
      auth: { kind: 'api_key', scopes: ['receivables:read'] },
      params: ClientParams,
      responses: { 200: { schema: SourceFreshness, description: 'Freshness of the Source' } },
      problems: [],
      public: true,
      handler: async ({ clientCode, grant }) => ({ status: 200, body: await freshness.read(store, clientCode, grant.feedMode) }),
    }),
  ]
}
