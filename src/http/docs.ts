import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import type { FastifyInstance } from 'fastify'
import swaggerUi from 'swagger-ui-dist'
import { type ProblemCode, problemCatalogue } from '../domain/problems.ts'
import type { Queryable } from '../store/store.ts'

const ASSETS = new Set(['swagger-ui.css', 'swagger-ui-bundle.js', 'swagger-ui-standalone-preset.js'])

const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`)

/** What each problem means for the integrator and what to do: the page behind every problem `type`. */
const advice: Partial<Record<ProblemCode, string>> = {
  malformed_json: 'The body is not valid JSON. Fix the payload; retrying the same bytes will fail again.',
  invalid_api_key: 'Send Authorization: Bearer <API key> with an active key issued for this environment.',
  client_scope_denied:
    'The key has no active grant for this client, the grant lacks the scope, or your address is outside its IP allowlist.',
  validation_error: 'See errors[]: each entry names the field (a JSON pointer) and a Zod issue code. Nothing was saved.',
  rate_limit_exceeded: 'Wait for Retry-After seconds. At most 60 requests a minute and one at a time per key.',
  projection_unavailable: 'Nothing was saved. Retry the same request with exponential backoff; retries are safe.',
  request_too_large: 'Bodies are limited to 256 KiB. Split the work, for example into batches.',
  unsupported_media_type: 'Send uncompressed application/json (application/merge-patch+json for PATCH).',
}

function page(title: string, body: string): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(title)}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>body{font-family:system-ui,sans-serif;max-width:52rem;margin:2rem auto;padding:0 1rem;line-height:1.5}code{background:#f3f3f3;padding:0 .2em}</style>
</head><body>${body}</body></html>`
}

/** Infrastructure routes outside the v1 contract: health, readiness and the human documentation. */
export function registerInfraRoutes(app: FastifyInstance, db: Queryable): void {
  app.get('/healthz', async () => ({ status: 'ok' }))
  app.get('/readyz', async (_request, reply) => {
    try {
      await db.query('SELECT 1')
      return { status: 'ready' }
    } catch {
      return reply.code(503).send({ status: 'unavailable' })
    }
  })
  app.get('/docs', async (_request, reply) => {
    reply.type('text/html; charset=utf-8')
    return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Inbound Receivables Service API</title>
<link rel="stylesheet" href="/docs/assets/swagger-ui.css"></head><body><div id="ui"></div>
<script src="/docs/assets/swagger-ui-bundle.js"></script>
<script>window.ui = SwaggerUIBundle({ url: '/v1/openapi.json', dom_id: '#ui', deepLinking: true })</script>
</body></html>`
  })
  app.get<{ Params: { file: string } }>('/docs/assets/:file', async (request, reply) => {
    const file = request.params.file
    if (!ASSETS.has(file)) return reply.code(404).type('text/plain').send('not found')
    reply.type(file.endsWith('.css') ? 'text/css' : 'text/javascript')
    return readFile(join(swaggerUi.getAbsoluteFSPath(), file))
  })
  app.get('/docs/problems', async (_request, reply) => {
    const rows = Object.entries(problemCatalogue)
      .map(([code, p]) => `<li><a href="/docs/problems/${code}"><code>${code}</code></a> (${p.status}) ${escapeHtml(p.title)}</li>`)
      .join('')
    reply.type('text/html; charset=utf-8')
    return page('Problem types', `<h1>Problem types</h1><ul>${rows}</ul>`)
  })
  app.get<{ Params: { code: string } }>('/docs/problems/:code', async (request, reply) => {
    const code = request.params.code as ProblemCode
    const entry = Object.hasOwn(problemCatalogue, code) ? problemCatalogue[code] : undefined
    reply.type('text/html; charset=utf-8')
    if (!entry) return reply.code(404).send(page('Unknown problem type', '<h1>Unknown problem type</h1>'))
    return page(
      entry.title,
      `<h1>${escapeHtml(entry.title)}</h1><p>HTTP status <strong>${entry.status}</strong>, code <code>${code}</code>.</p>
<p>${escapeHtml(advice[code] ?? 'See the detail field of the problem for the specific cause.')}</p>
<p><a href="/docs/problems">All problem types</a> · <a href="/docs">API reference</a></p>`,
    )
  })
}
