import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import type { FastifyInstance } from 'fastify'
// Only the path helper: the package's index also loads the 1.5 MB browser bundle (about 0.7 s at every start, and a
// process.binding() call that Node deprecates).
import swaggerUiPath from 'swagger-ui-dist/absolute-path.js'
import { type ProblemCode, problemCatalogue } from '../domain/problems.ts'
import { ping } from '../store/readiness.ts'
import type { SecretReadiness } from '../store/secret-keys.ts'
import type { Queryable } from '../store/store.ts'
import { registerGuideRoutes } from './guide.ts'
import { problemPageText } from './problem-docs.ts'
import { crossCuttingProblems, type RouteDef } from './route.ts'

const ASSETS = new Set(['swagger-ui.css', 'swagger-ui-bundle.js', 'swagger-ui-standalone-preset.js'])

const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`)

/** Page text: escaped, with `backticked` spans as code. */
const inline = (s: string) => escapeHtml(s).replace(/`([^`]+)`/g, '<code>$1</code>')

/** `/v1/clients/:clientCode` as the API reference writes it: `/v1/clients/{clientCode}`. */
const displayPath = (path: string) => path.replace(/:([A-Za-z]+)/g, '{$1}')

/** Routes listed in full on a problem page; beyond this they fold away (cross-cutting codes name nearly every route). */
const ROUTES_SHOWN_OPEN = 8

function page(title: string, body: string): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(title)}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>body{font-family:system-ui,sans-serif;max-width:52rem;margin:2rem auto;padding:0 1rem;line-height:1.5}code{background:#f3f3f3;padding:0 .2em}h2{font-size:1.1rem;margin-top:1.5rem}</style>
</head><body>${body}</body></html>`
}

/** Which routes can answer each problem code, from the same route table that generates the OpenAPI document. */
function routesByProblem(routes: readonly RouteDef[]): Map<ProblemCode, string[]> {
  const byCode = new Map<ProblemCode, string[]>()
  for (const def of routes) {
    for (const code of new Set([...def.problems, ...crossCuttingProblems(def)])) {
      const list = byCode.get(code) ?? []
      list.push(`${def.method} ${displayPath(def.path)}`)
      byCode.set(code, list)
    }
  }
  return byCode
}

function routeList(routes: readonly string[]): string {
  if (routes.length === 0) return ''
  const items = `<ul>${routes.map((r) => `<li><code>${escapeHtml(r)}</code></li>`).join('')}</ul>`
  const body = routes.length > ROUTES_SHOWN_OPEN ? `<details><summary>${routes.length} routes</summary>${items}</details>` : items
  return `<h2>Routes that answer it</h2>${body}`
}

function problemPage(code: ProblemCode, routes: readonly string[]): string {
  const entry = problemCatalogue[code]
  const text = problemPageText(code)
  return page(
    `${entry.title} (${code})`,
    `<h1>${escapeHtml(entry.title)}</h1>
<p>HTTP status <strong>${entry.status}</strong>, code <code>${code}</code>, sent as <code>application/problem+json</code>.</p>
<h2>What causes it</h2><p>${inline(text.cause)}</p>
<h2>How to fix it</h2><p>${inline(text.fix)}</p>
<h2>Retrying the identical request</h2><p>${inline(text.retry)}</p>
${routeList(routes)}
<p><a href="/docs/problems">All problem types</a> · <a href="/docs">API reference</a> · <a href="/docs/guide">Guide</a></p>`,
  )
}

/** `target` with the query of the request URL, if any. The target is a fixed local path, so no open redirect. */
function withQuery(target: string, url: string): string {
  const q = url.indexOf('?')
  return q === -1 ? target : `${target}${url.slice(q)}`
}

/**
 * Infrastructure routes outside the v1 contract: health, readiness and the human documentation. `routes` is
 * the service's route table, so each problem page lists exactly the routes that can answer it.
 */
export function registerInfraRoutes(
  app: FastifyInstance,
  db: Queryable,
  routes: readonly RouteDef[],
  opts: { degraded?: () => SecretReadiness | undefined } = {},
): void {
  const answeredBy = routesByProblem(routes)
  app.get('/healthz', async () => ({ status: 'ok' }))
  // 200 while the store answers. An instance that serves but cannot do all it should (stored secrets its key ring
  // does not open) says so in `degraded` and stays 200: taking it out of the balancer would not open the secrets,
  // and during a rotation rolled out in the wrong order it would take every instance out at once
  // (docs/decisions.md, "Rotating the key with many instances").
  app.get('/readyz', async (_request, reply) => {
    try {
      await ping(db)
      const degraded = opts.degraded?.()
      return degraded ? { status: 'ready', degraded: [degraded] } : { status: 'ready' }
    } catch {
      return reply.code(503).send({ status: 'unavailable' })
    }
  })
  // The service root and `/docs/` lead people to the reference. 302, not 301: browsers keep a 301 for good,
  // and the root may one day serve something of its own.
  app.get('/', async (request, reply) => reply.redirect(withQuery('/docs', request.url), 302))
  app.get('/docs/', async (request, reply) => reply.redirect(withQuery('/docs', request.url), 302))
  app.get('/docs', async (_request, reply) => {
    reply.type('text/html; charset=utf-8')
    return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Inbound Receivables Service API</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="stylesheet" href="/docs/assets/swagger-ui.css"></head><body>
<noscript><p>The API reference needs JavaScript. The OpenAPI document is at <a href="/v1/openapi.json">/v1/openapi.json</a>.</p></noscript>
<p style="font-family:system-ui,sans-serif;margin:1rem 1.25rem 0"><a href="/docs/guide">The guide</a>: how the service works, from getting started to going live, one concept a page. Errors: <a href="/docs/problems">problem types</a>, what causes each and how to fix it.</p>
<div id="ui"></div>
<script src="/docs/assets/swagger-ui-bundle.js"></script>
<script>window.ui = SwaggerUIBundle({ url: '/v1/openapi.json', dom_id: '#ui', deepLinking: true })</script>
</body></html>`
  })
  app.get<{ Params: { file: string } }>('/docs/assets/:file', async (request, reply) => {
    const file = request.params.file
    if (!ASSETS.has(file)) return reply.code(404).type('text/plain').send('not found')
    reply.type(file.endsWith('.css') ? 'text/css' : 'text/javascript')
    return readFile(join(swaggerUiPath(), file))
  })
  registerGuideRoutes(app)
  app.get('/docs/problems', async (_request, reply) => {
    const rows = (Object.entries(problemCatalogue) as [ProblemCode, (typeof problemCatalogue)[ProblemCode]][])
      .map(
        ([code, p]) =>
          `<tr><td>${p.status}</td><td><a href="/docs/problems/${code}"><code>${code}</code></a></td><td>${escapeHtml(p.title)}</td></tr>`,
      )
      .join('')
    reply.type('text/html; charset=utf-8')
    return page(
      'Problem types',
      `<h1>Problem types</h1>
<p>Every error is an <code>application/problem+json</code> body whose <code>type</code> links to one of these pages.</p>
<table><thead><tr><th>Status</th><th>Code</th><th>Title</th></tr></thead><tbody>${rows}</tbody></table>
<p><a href="/docs">API reference</a> · <a href="/docs/guide">Guide</a></p>`,
    )
  })
  app.get<{ Params: { code: string } }>('/docs/problems/:code', async (request, reply) => {
    const code = request.params.code
    // `/docs/problems/` reaches this route with an empty code.
    if (code === '') return reply.redirect(withQuery('/docs/problems', request.url), 302)
    reply.type('text/html; charset=utf-8')
    if (!Object.hasOwn(problemCatalogue, code)) {
      return reply
        .code(404)
        .send(page('Unknown problem type', '<h1>Unknown problem type</h1><p><a href="/docs/problems">All problem types</a></p>'))
    }
    return problemPage(code as ProblemCode, answeredBy.get(code as ProblemCode) ?? [])
  })
}
