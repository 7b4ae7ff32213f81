import { defineRoute, type RouteDef } from '../../http/route.ts'
import { type RouteDeps, writeRoute } from '../operations.ts'
import { BookCompletion, BookCompletionParams } from './schema.ts'
import type { BookService } from './service.ts'

const path = '/v1/clients/:clientCode/book-completions/:externalCompletionId'

export function bookRoutes(deps: RouteDeps, book: BookService): RouteDef[] {
  return [
    writeRoute(deps, book.declareOperation, {
      method: 'PUT',
      path,
      idParam: 'externalCompletionId',
      params: BookCompletionParams,
      operationId: 'putBookCompletion',
      summary: 'Declare the complete book: the listed batches cover every Receivable',
      description: 'Every other non-closed Receivable is flagged and held until the Source writes it again or closes it.',
      tags: ['Complete-book declarations'],
      problems: ['batches_not_finished', 'stale_source_position', 'book_completion_conflict'],
      answers: { 201: 'Accepted', 200: 'An identical retry' },
    }),
    defineRoute({
      method: 'GET',
      path,
      operationId: 'getBookCompletion',
      summary: 'Read a complete-book declaration with the Receivables it flagged',
      description:
        'Reads a complete-book declaration: the batches it named, how many Receivables they covered, and the Receivables it flagged as omitted (`held` until the Source writes or closes them, then `released`).',
      tags: ['Complete-book declarations'],
      auth: { kind: 'api_key', scopes: ['receivables:read'] },
      params: BookCompletionParams,
      responses: { 200: { schema: BookCompletion, description: 'The declaration; each omission held or released' } },
      problems: ['financial_event_not_found'],
      public: true,
      handler: async ({ clientCode, params }) => ({ status: 200, body: await book.get(clientCode, params.externalCompletionId) }),
    }),
  ]
}
