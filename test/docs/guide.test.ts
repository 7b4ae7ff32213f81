import assert from 'node:assert/strict'
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { problemCatalogue } from '../../src/domain/problems.ts'
import { GUIDE_CSP, GUIDE_DIR, GUIDE_PAGE_FOR_TAG, GUIDE_PAGES, guidePath, renderGuide } from '../../src/http/guide.ts'
import { startTestApp, type TestApp } from '../helpers/app.ts'
import { engineName } from '../helpers/store.ts'

/**
 * The guide (/docs/guide, from docs/guide/*.md): every page served with its strict CSP, linked from /docs, from
 * every problem page and from the README; every public operation described and linked to its concept page.
 * (test/browser/guide.test.ts renders it in a browser and follows every link.)
 */
let t: TestApp
// biome-ignore lint/suspicious/noExplicitAny: the OpenAPI document is inspected field by field
let document: any
before(async () => {
  t = await startTestApp()
  document = (await t.call('GET', '/v1/openapi.json')).json
})
after(() => t.close())

const publicRoutes = () => t.app.routes.filter((r) => r.public)

describe(`the guide (${engineName})`, () => {
  test('every public operation has a description on its route object (the list names any that lacks one)', () => {
    const missing = publicRoutes()
      .filter((r) => (r.description ?? '').trim().length < 40)
      .map((r) => `${r.method} ${r.path} (${r.operationId})`)
    assert.deepEqual(missing, [])
  })

  test('every tag of a public operation has a concept page, and each operation links to it in the OpenAPI document', () => {
    const unmapped = [...new Set(publicRoutes().flatMap((r) => r.tags))].filter(
      (tag) => !GUIDE_PAGES.some((p) => p.slug === GUIDE_PAGE_FOR_TAG[tag]),
    )
    assert.deepEqual(unmapped, [])
    let operations = 0
    for (const route of publicRoutes()) {
      const path = route.path.replace(/:([A-Za-z]+)/g, '{$1}')
      const operation = document.paths[path][route.method.toLowerCase()]
      const page = GUIDE_PAGES.find((p) => p.slug === GUIDE_PAGE_FOR_TAG[route.tags[0] as string])!
      assert.equal(
        operation.description,
        `${route.description}\n\nConcepts: [${page.title}](${guidePath(page.slug)}) in the guide.`,
        route.operationId,
      )
      operations++
    }
    assert.equal(operations, publicRoutes().length)
    assert.ok(operations >= 44, `${operations} public operations`)
  })

  test('the operator document carries no guide links', async () => {
    const operator = (await t.admin('GET', '/admin/v1/openapi.json')).json
    const descriptions = Object.values(operator.paths).flatMap((p) =>
      Object.values(p as Record<string, { description?: string }>).map((o) => o.description ?? ''),
    )
    assert.ok(descriptions.length > 10)
    assert.deepEqual(
      descriptions.filter((d) => d.includes('/docs/guide')),
      [],
    )
  })

  test('the index and every page answer 200 HTML with the strict CSP; the index lists every page in order', async () => {
    const index = await t.call('GET', '/docs/guide', { key: null })
    assert.equal(index.status, 200)
    assert.equal(index.headers['content-type'], 'text/html; charset=utf-8')
    assert.equal(index.headers['content-security-policy'], GUIDE_CSP)
    const listed = [...index.body.matchAll(/<li><a href="\/docs\/guide\/([a-z-]+)">/g)].map((m) => m[1])
    assert.deepEqual(
      listed.slice(0, GUIDE_PAGES.length),
      GUIDE_PAGES.map((p) => p.slug),
    )
    for (const page of GUIDE_PAGES) {
      const res = await t.call('GET', guidePath(page.slug), { key: null })
      assert.equal(res.status, 200, page.slug)
      assert.equal(res.headers['content-security-policy'], GUIDE_CSP)
      assert.equal(res.headers['x-content-type-options'], 'nosniff')
      assert.match(res.body, new RegExp(`<title>${page.title.replace(/[()]/g, '.')}: Inbound Receivables Service guide</title>`))
      assert.match(res.body, /<h1>/)
      assert.doesNotMatch(res.body, /<script/i)
    }
    const missing = await t.call('GET', '/docs/guide/nope', { key: null })
    assert.equal(missing.status, 404)
    assert.equal(missing.headers['content-security-policy'], GUIDE_CSP)
    const slash = await t.call('GET', '/docs/guide/', { key: null })
    assert.deepEqual([slash.status, slash.headers.location], [302, '/docs/guide'])
  })

  test('every Markdown file of docs/guide is a page (and every page a file)', () => {
    const files = readdirSync(GUIDE_DIR)
      .filter((f) => f.endsWith('.md'))
      .sort()
    assert.deepEqual(files, GUIDE_PAGES.map((p) => `${p.slug}.md`).sort())
  })

  test('/docs, every problem page, the problem index and the README link to the guide', async () => {
    assert.match((await t.call('GET', '/docs', { key: null })).body, /<a href="\/docs\/guide">The guide<\/a>/)
    assert.match((await t.call('GET', '/docs/problems', { key: null })).body, /<a href="\/docs\/guide">Guide<\/a>/)
    for (const code of Object.keys(problemCatalogue)) {
      assert.match((await t.call('GET', `/docs/problems/${code}`, { key: null })).body, /<a href="\/docs\/guide">Guide<\/a>/, code)
    }
    const readme = readFileSync('README.md', 'utf8')
    assert.ok(readme.includes('/docs/guide'), 'the README names the served guide')
    assert.ok(readme.includes('](docs/guide/getting-started.md)'), 'the README links the guide source')
  })

  test('raw HTML in the Markdown is shown as text, never passed through', () => {
    const dir = mkdtempSync(join(tmpdir(), 'irs-guide-'))
    try {
      for (const page of GUIDE_PAGES)
        writeFileSync(join(dir, `${page.slug}.md`), `# ${page.title}\n\n<script>alert(1)</script>\n\n<img src=x onerror=alert(1)>\n`)
      const html = renderGuide(dir).get('getting-started') ?? ''
      assert.doesNotMatch(html, /<script|<img/)
      assert.ok(html.includes('&#60;script&#62;alert(1)&#60;/script&#62;'), html)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})
