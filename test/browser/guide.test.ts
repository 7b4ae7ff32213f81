import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { type Browser, chromium } from 'playwright-core'
import { GUIDE_PAGES, guidePath } from '../../src/http/guide.ts'
import { startTestApp, type TestApp } from '../helpers/app.ts'
import { chromiumPath, seen, skipWithoutChromium } from '../helpers/browser.ts'

/**
 * The guide in a real browser (Debian's chromium through playwright-core, as test/browser/docs.test.ts): every page
 * renders under its CSP (the style applies, no violation, no script), and every link on every page is followed:
 * an internal one must answer 200, and nothing is fetched from anywhere but the service.
 */
const executablePath = chromiumPath
const skip = skipWithoutChromium

let t: TestApp
let browser: Browser
let base: string

before(async () => {
  if (!executablePath) return
  t = await startTestApp()
  base = await t.app.app.listen({ host: '127.0.0.1', port: 0 })
  browser = await chromium.launch({ executablePath })
})
after(async () => {
  await browser?.close()
  await t?.close()
})

test('every guide page renders under its CSP, and every link on it is followed (internal: 200; nothing external fetched)', {
  skip,
}, async () => {
  const context = await browser.newContext()
  const outside: string[] = []
  // Any request that is not to the service is recorded and refused: the guide must fetch nothing from elsewhere.
  await context.route('**/*', (route) => {
    const url = route.request().url()
    if (url.startsWith(`${base}/`)) return route.continue()
    outside.push(url)
    return route.abort()
  })
  const page = await context.newPage()
  const problems: string[] = []
  page.on('console', (m) => {
    if (m.type() === 'error') problems.push(m.text())
  })
  page.on('pageerror', (err) => problems.push(err.message))

  const toVisit = ['/docs/guide', ...GUIDE_PAGES.map((p) => guidePath(p.slug))]
  const links = new Map<string, string>() // target -> first page linking it
  for (const path of toVisit) {
    const response = await page.goto(`${base}${path}`)
    assert.equal(response?.status(), 200, path)
    const h1 = await seen(page.locator('h1'))
    const expected = GUIDE_PAGES.find((p) => guidePath(p.slug) === path)?.title ?? 'Inbound Receivables Service: the guide'
    assert.equal(h1, expected, path)
    // The inline style block applies (a CSP that blocked it would leave the default margins and font).
    assert.equal(await page.locator('body').evaluate((b) => getComputedStyle(b).maxWidth), `${52 * 16}px`, path)
    assert.equal(await page.locator('script').count(), 0, path)
    for (const href of await page.locator('a[href]').evaluateAll((as) => as.map((a) => (a as HTMLAnchorElement).href))) {
      const target = href.split('#')[0] as string
      if (!links.has(target)) links.set(target, path)
    }
  }
  assert.deepEqual(problems, [])

  const internal = [...links.keys()].filter((href) => href.startsWith(`${base}/`))
  const external = [...links.keys()].filter((href) => !href.startsWith(`${base}/`))
  // Every page of the guide is linked from the others, and the guide reaches the reference and problem pages.
  for (const p of GUIDE_PAGES) assert.ok(links.has(`${base}${guidePath(p.slug)}`), p.slug)
  assert.ok(links.has(`${base}/docs`) && links.has(`${base}/docs/problems`))
  assert.ok(internal.filter((h) => h.includes('/docs/problems/')).length >= 20, 'the guide links the problem pages it names')
  assert.deepEqual(external, [])

  // Follow every internal link in the browser: each answers 200.
  const failed: string[] = []
  for (const href of internal) {
    const response = await page.goto(href)
    if (response?.status() !== 200) failed.push(`${href} (linked from ${links.get(href)}): ${response?.status()}`)
  }
  assert.deepEqual(failed, [])
  assert.deepEqual(outside, [])
  await context.close()
})

test('from /docs and from a problem page, a reader reaches the guide by its link', { skip }, async () => {
  const page = await browser.newPage()
  await page.goto(`${base}/docs/problems/recovery_held`)
  await page.getByRole('link', { name: 'Guide' }).click()
  await page.waitForURL(`${base}/docs/guide`)
  await page.getByRole('link', { name: 'Holds and recovery instructions' }).first().click()
  await page.waitForURL(`${base}/docs/guide/holds-and-recovery-instructions`)
  assert.match(await seen(page.locator('main')), /Importing or updating a Receivable never starts recovery/)
  await page.goto(`${base}/docs`)
  await page.getByRole('link', { name: 'The guide' }).click()
  await page.waitForURL(`${base}/docs/guide`)
  await page.close()
})
