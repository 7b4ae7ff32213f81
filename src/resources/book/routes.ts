import { ClientParams } from '../../http/common-schemas.ts'
import { defineRoute, type RouteDef } from '../../http/route.ts'
import { type RouteDeps, writeRoute } from '../operations.ts'
import { BookCompletion, BookCompletionParams, BookCompletionPreview, BookCompletionWrite } from './schema.ts'
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
      description:
        'Every other non-closed Receivable is flagged and held until the Source writes it again or closes it; a Receivable the listed batches wrote that an earlier declaration flagged is released. `POST .../book-completions/preview` answers what this would flag and release, changing nothing.',
      tags: ['Complete-book declarations'],
      problems: ['batches_not_finished', 'stale_source_position', 'book_completion_conflict'],
      answers: { 201: 'Accepted', 200: 'An identical retry' },
    }),
    defineRoute({
      method: 'POST',
      path: '/v1/clients/:clientCode/book-completions/preview',
      operationId: 'previewBookCompletion',
      summary: 'Preview a complete-book declaration: what it would flag and release, changing nothing',
      description:
        "Takes a declaration's body and answers what declaring it now would do: the Receivables it would flag (the first 100 by id, the exact count, and `omissionsTruncated`) and the flagged Receivables it would release, with the same refusals as the declaration (409 batches_not_finished, 409 stale_source_position, 422 unknown_reference). Nothing is written and nothing is locked, so a declaration made later may differ if the book changed in between; it computes exactly what this preview computes.",
      tags: ['Complete-book declarations'],
      auth: { kind: 'api_key', scopes: ['receivables:read'] },
      params: ClientParams,
      body: { schema: BookCompletionWrite, mediaType: 'application/json' },
      responses: { 200: { schema: BookCompletionPreview, description: 'What the declaration would flag and release' } },
      problems: ['batches_not_finished', 'stale_source_position'],
      public: true,
      handler: async ({ clientCode, body }) => ({ status: 200, body: await book.preview(clientCode, body) }),
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
