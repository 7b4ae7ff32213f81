import { defineRoute, type RouteDef } from '../../http/route.ts'
import { ReceivableParams } from '../receivables/schema.ts'
import { TimelinePage, TimelineQuery } from './schema.ts'
import { TIMELINE, type TimelineService } from './service.ts'

const DESCRIPTION =
  'Everything that happened to the Receivable, oldest first: its revisions, financial events, payment observations, holds placed and released with their reason, recovery instructions, payment requests, payments, refunds, reversals, reconciliations and receipts. Each entry says when, who (`actor`: the Integration and its API key name, an operator, the payment provider, or the service itself; `unknown` for revisions recorded before the service kept it) and what, with a `ref` to the resource it concerns. Pages of `limit` entries (1 to 200, default 50); pass `nextCursor` as `cursor` for the next page, until it is null.'

/** The Integration's route (scope receivables:read) and the operator's (a support agent's or examiner's question). */
export function timelineRoutes(timeline: TimelineService): RouteDef[] {
  return [
    defineRoute({
      method: 'GET',
      path: '/v1/clients/:clientCode/receivables/:externalReceivableId/timeline',
      operationId: 'getReceivableTimeline',
      summary: "Read a Receivable's timeline",
      description: DESCRIPTION,
      tags: ['Receivables'],
      auth: { kind: 'api_key', scopes: ['receivables:read'] },
      params: ReceivableParams,
      query: TimelineQuery,
      responses: { 200: { schema: TimelinePage, description: "A page of the Receivable's timeline, oldest first" } },
      problems: ['receivable_not_found'],
      public: true,
      async handler({ clientCode, params, query }) {
        return { status: 200, body: await timeline.page(clientCode, params.externalReceivableId, query.cursor, query.limit) }
      },
    }),
    defineRoute({
      method: 'GET',
      path: '/admin/v1/clients/:clientCode/receivables/:externalReceivableId/timeline',
      operationId: 'adminGetReceivableTimeline',
      summary: "Read a Receivable's timeline (operator)",
      description: DESCRIPTION,
      tags: ['Operator'],
      auth: { kind: 'admin' },
      params: ReceivableParams,
      query: TimelineQuery,
      responses: { 200: { schema: TimelinePage, description: "A page of the Receivable's timeline, oldest first" } },
      problems: ['receivable_not_found'],
      public: false,
      async handler({ params, query }) {
        return {
          status: 200,
          body: await timeline.page(params.clientCode, params.externalReceivableId, query.cursor, query.limit, `admin/${TIMELINE}`),
        }
      },
    }),
  ]
}
