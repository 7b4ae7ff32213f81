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
      description:
        "Tells whether the Source has been heard from recently enough (`fresh`) or not (`stale`, which holds every Receivable with `source_stale`), judged for the caller's feed mode, with the last times and position received.",
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
