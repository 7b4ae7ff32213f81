import { ClientParams } from '../../http/common-schemas.ts'
import { defineRoute, type RouteDef } from '../../http/route.ts'
import { type RouteDeps, writeRoute } from '../operations.ts'
import { EventList, EventListQuery, EventParams, EventResponse, FAMILIES, type Family } from './schema.ts'
import type { FinancialEventService } from './service.ts'

export function financialEventRoutes(deps: RouteDeps, events: FinancialEventService): RouteDef[] {
  return (Object.keys(FAMILIES) as Family[]).flatMap((family) => {
    const f = FAMILIES[family]
    const base = `/v1/clients/:clientCode/${f.segment}`
    const path = `${base}/:externalEventId`
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
      defineRoute({
        method: 'GET',
        path: base,
        operationId: `list${f.title}s`,
        summary: `List ${f.noun.replace(/^an? /, '')}s, newest first`,
        description: `Every ${f.noun.replace(/^an? /, '')} the Source recorded, newest accepted first, each exactly as its GET shows it; \`externalReceivableId\` keeps those of one Receivable. Pages of \`limit\` items (1 to 200, default 50): pass \`nextCursor\` as \`cursor\` for the next page, until it is null. Events recorded while you page appear at most once and never move the ones you have not reached yet.`,
        tags: ['Financial corrections'],
        auth: { kind: 'api_key', scopes: ['financial_corrections:read'] },
        params: ClientParams,
        query: EventListQuery,
        responses: { 200: { schema: EventList[family], description: `A page of ${f.title}s, newest first` } },
        problems: [],
        public: true,
        handler: async ({ clientCode, query }) => ({ status: 200, body: await events.list(clientCode, family, query) }),
      }),
    ]
  })
}
