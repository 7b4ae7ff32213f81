import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { FastifyInstance, FastifyReply } from 'fastify'
import { Marked } from 'marked'

/**
 * The guide at /docs/guide: Markdown files in docs/guide/ (the same path from src/http and dist/http; the image
 * copies them), rendered once, at first request, by `marked` (docs/decisions.md, "The guide"). The Markdown is the
 * project's own, never a caller's; raw HTML in it is escaped all the same.
 */
export interface GuidePage {
  slug: string
  title: string
}

/** The pages in reading order; the first is the guide's index. */
export const GUIDE_PAGES: readonly GuidePage[] = [
  { slug: 'getting-started', title: 'Getting started' },
  { slug: 'customers-and-receivables', title: 'Customers and Receivables' },
  { slug: 'batches-and-the-complete-book', title: 'Batches and the complete book' },
  { slug: 'holds-and-recovery-instructions', title: 'Holds and recovery instructions' },
  { slug: 'financial-position', title: 'The financial position and the money rules' },
  { slug: 'payment-requests', title: 'Payment requests, the hosted page, refunds' },
  { slug: 'reconciliation-and-receipts', title: 'Reconciliation and receipts' },
  { slug: 'change-feed-and-webhooks', title: 'The change feed and webhooks' },
  { slug: 'limits-retries-idempotency', title: 'Limits, retries and idempotency' },
  { slug: 'sandbox-and-going-live', title: 'Sandbox, test clocks and going live' },
]

/**
 * The concept page of each OpenAPI tag: every operation's description links to its tag's page, so a new route
 * under an existing tag needs nothing here (test/docs/guide.test.ts names any tag missing).
 */
export const GUIDE_PAGE_FOR_TAG: Readonly<Record<string, string>> = {
  Customers: 'customers-and-receivables',
  Receivables: 'customers-and-receivables',
  'Financial corrections': 'financial-position',
  'Payment observations': 'financial-position',
  Batches: 'batches-and-the-complete-book',
  'Complete-book declarations': 'batches-and-the-complete-book',
  'Balance snapshots': 'batches-and-the-complete-book',
  'Source freshness': 'batches-and-the-complete-book',
  'Recovery instructions': 'holds-and-recovery-instructions',
  'Collection summary': 'holds-and-recovery-instructions',
  'Payment requests': 'payment-requests',
  Refunds: 'payment-requests',
  'Payment reconciliations': 'reconciliation-and-receipts',
  'Receipt delivery': 'reconciliation-and-receipts',
  'Change feed': 'change-feed-and-webhooks',
  Webhooks: 'change-feed-and-webhooks',
  Specification: 'getting-started',
}

export const guidePath = (slug: string) => `/docs/guide/${slug}`

/** The guide page of an operation with these tags (its first mapped tag), or null. */
export function guidePageForTags(tags: readonly string[]): GuidePage | null {
  for (const tag of tags) {
    const slug = GUIDE_PAGE_FOR_TAG[tag]
    const page = GUIDE_PAGES.find((p) => p.slug === slug)
    if (page) return page
  }
  return null
}

/** An operation's description with the link to its concept page appended (Markdown, as OpenAPI descriptions are). */
export function withGuideLink(description: string | undefined, tags: readonly string[]): string | undefined {
  const page = guidePageForTags(tags)
  if (!page) return description
  const link = `Concepts: [${page.title}](${guidePath(page.slug)}) in the guide.`
  return description ? `${description}\n\n${link}` : link
}

export const GUIDE_DIR = join(dirname(fileURLToPath(import.meta.url)), '../../docs/guide')

const STYLE =
  'body{font-family:system-ui,sans-serif;max-width:52rem;margin:2rem auto;padding:0 1rem;line-height:1.5}' +
  'code{background:#f3f3f3;padding:0 .2em}pre{background:#f3f3f3;padding:.6rem;overflow-x:auto}pre code{padding:0}' +
  'table{border-collapse:collapse;display:block;overflow-x:auto;max-width:100%}td,th{border:1px solid #ccc;padding:.2rem .5rem;text-align:left;vertical-align:top}' +
  'nav{font-size:.95rem;border-bottom:1px solid #ddd;padding-bottom:.5rem}nav a{margin-right:.6rem}h2{font-size:1.2rem;margin-top:1.6rem}'

/** No script, no external anything: only the one inline style block, by its hash. */
export const GUIDE_CSP = `default-src 'none'; style-src 'sha256-${createHash('sha256').update(STYLE).digest('base64')}'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'`

const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`)

function markdown(): Marked {
  const marked = new Marked({ gfm: true })
  // Raw HTML in the Markdown is shown as text, never passed through.
  marked.use({ renderer: { html: ({ text }) => escapeHtml(text) } })
  return marked
}

function shell(title: string, current: string | null, body: string): string {
  const nav = ['<a href="/docs/guide">Guide</a>', '<a href="/docs">API reference</a>', '<a href="/docs/problems">Problem types</a>'].join(
    '',
  )
  const pages = GUIDE_PAGES.map((p, i) =>
    p.slug === current
      ? `<li><strong>${i}. ${escapeHtml(p.title)}</strong></li>`
      : `<li><a href="${guidePath(p.slug)}">${i}. ${escapeHtml(p.title)}</a></li>`,
  ).join('')
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(title)}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>${STYLE}</style>
</head><body><nav aria-label="Documentation">${nav}</nav><main>${body}</main>
<footer><h2>The guide</h2><ol start="0">${pages}</ol></footer></body></html>`
}

let rendered: Map<string, string> | undefined

/** Every page, rendered (cached after the first call). `''` is the index. */
export function renderGuide(dir = GUIDE_DIR): Map<string, string> {
  if (rendered && dir === GUIDE_DIR) return rendered
  const marked = markdown()
  const pages = new Map<string, string>()
  GUIDE_PAGES.forEach((page, i) => {
    const source = readFileSync(join(dir, `${page.slug}.md`), 'utf8')
    const html = marked.parse(source, { async: false })
    const prev = GUIDE_PAGES[i - 1]
    const next = GUIDE_PAGES[i + 1]
    const pager = [
      prev ? `<a href="${guidePath(prev.slug)}" rel="prev">Previous: ${escapeHtml(prev.title)}</a>` : '',
      next ? `<a href="${guidePath(next.slug)}" rel="next">Next: ${escapeHtml(next.title)}</a>` : '',
    ]
      .filter(Boolean)
      .join(' · ')
    pages.set(page.slug, shell(`${page.title}: Inbound Receivables Service guide`, page.slug, `${html}<p>${pager}</p>`))
  })
  const index = `<h1>Inbound Receivables Service: the guide</h1>
<p>How the service works, one concept a page. Start with <a href="${guidePath('getting-started')}">getting started</a>; the
<a href="/docs">API reference</a> has every operation (each links back to its page here), and
<a href="/docs/problems">problem types</a> every error.</p>
<ol start="0">${GUIDE_PAGES.map((p) => `<li><a href="${guidePath(p.slug)}">${escapeHtml(p.title)}</a></li>`).join('')}</ol>`
  pages.set('', shell('Guide: Inbound Receivables Service', '', index))
  if (dir === GUIDE_DIR) rendered = pages
  return pages
}

export function registerGuideRoutes(app: FastifyInstance): void {
  const send = (slug: string) => async (_request: unknown, reply: FastifyReply) => {
    const html = renderGuide().get(slug)
    reply.header('content-security-policy', GUIDE_CSP).header('x-content-type-options', 'nosniff').type('text/html; charset=utf-8')
    if (html === undefined)
      return reply.code(404).send(shell('Not in the guide', null, '<h1>No such guide page</h1><p><a href="/docs/guide">The guide</a></p>'))
    return html
  }
  app.get('/docs/guide', send(''))
  app.get('/docs/guide/', async (_request, reply) => reply.redirect('/docs/guide', 302))
  app.get<{ Params: { page: string } }>('/docs/guide/:page', async (request, reply) => send(request.params.page)(request, reply))
}
