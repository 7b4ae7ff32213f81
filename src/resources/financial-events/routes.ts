import { defineRoute, type RouteDef } from '../../http/route.ts'
import { type RouteDeps, writeRoute } from '../operations.ts'
import { EventParams, EventResponse, FAMILIES, type Family } from './schema.ts'
import type { FinancialEventService } from './service.ts'

export function financialEventRoutes(deps: RouteDeps, events: FinancialEventService): RouteDef[] {
  return (Object.keys(FAMILIES) as Family[]).flatMap((family) => {
    const f = FAMILIES[family]
    const path = `/v1/clients/:clientCode/${f.segment}/:externalEventId`
    return [
      writeRoute(deps, events.operations[family], {
        method: 'PUT',
        path,
        idParam: 'externalEventId',
        params: EventParams,
        operationId: `put${f.title}`,
        summary: `Record ${f.noun}`,
        description:
          'Immutable. An identical retry answers 200 with the original acceptedAt. These operations never collect money or refund.',
        tags: ['Financial corrections'],
        problems: ['financial_event_conflict', 'stale_source_revision', 'feed_mode_mismatch'],
      }),
      defineRoute({
        method: 'GET',
        path,
        operationId: `get${f.title}`,
        summary: `Read ${f.noun}`,
        description: `Reads ${f.noun} exactly as it was accepted (financial events are immutable), with its \`acceptedAt\`. Its effect on the Receivable is in the Receivable's \`financialPosition\`.`,
        tags: ['Financial corrections'],
        auth: { kind: 'api_key', scopes: ['financial_corrections:read'] },
        params: EventParams,
        responses: { 200: { schema: EventResponse[family], description: `The ${f.title}` } },
        problems: ['financial_event_not_found'],
        public: true,
        oneRead: (db, { clientCode, params }) => events.get(clientCode, family, params.externalEventId, db),
        handler: async ({ read }) => ({ status: 200, body: read }),
      }),
    ]
  })
}
