import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { type Browser, chromium } from 'playwright-core'
import { problemDocs } from '../../src/http/problem-docs.ts'
import { startTestApp, type TestApp } from '../helpers/app.ts'
import { chromiumPath, seen, skipWithoutChromium } from '../helpers/browser.ts'

/**
 * The documentation in a real browser: Debian's chromium driven by playwright-core (no browser download).
 * Skipped, with the reason, where no chromium binary is installed (Debian: `apt-get install chromium`).
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

test('/docs renders the API reference: its title and every operation of the OpenAPI document', { skip }, async () => {
  type Operation = { tags?: string[] }
  const document = (await (await fetch(`${base}/v1/openapi.json`)).json()) as { paths: Record<string, Record<string, Operation>> }
  const METHODS = new Set(['get', 'put', 'post', 'patch', 'delete', 'head', 'options', 'trace'])
  // Swagger UI shows an operation once under each of its tags (untagged ones under "default").
  const operations = Object.values(document.paths)
    .flatMap((item) => Object.entries(item).filter(([method]) => METHODS.has(method)))
    .reduce((n, [, op]) => n + Math.max(1, op.tags?.length ?? 0), 0)
  assert.ok(operations > 10, `only ${operations} operations`)

  const page = await browser.newPage()
  const errors: string[] = []
  page.on('pageerror', (err) => errors.push(err.message))
  await page.goto(`${base}/docs`)
  await page.locator('.opblock').first().waitFor({ timeout: 60_000 })

  assert.match(await seen(page.locator('.info .title')), /^Inbound Receivables Service\b/)
  assert.equal(await page.locator('.opblock').count(), operations)
  const customerPut = page.locator('.opblock-put', {
    has: page.locator('[data-path="/v1/clients/{clientCode}/customers/{externalCustomerId}"]'),
  })
  assert.equal(await customerPut.count(), 1)
  assert.deepEqual(errors, [])
  await page.close()
})

test('the service root leads the browser to /docs', { skip }, async () => {
  const page = await browser.newPage()
  const response = await page.goto(`${base}/`)
  assert.equal(new URL(page.url()).pathname, '/docs')
  assert.equal(response?.status(), 200)
  await page.close()
})

test('a problem page shows its title, status, cause and fix', { skip }, async () => {
  const page = await browser.newPage()
  const response = await page.goto(`${base}/docs/problems/batches_not_finished`)
  assert.equal(response?.status(), 200)
  assert.equal(await seen(page.locator('h1')), 'Batches not finished')
  assert.match(await seen(page.locator('body')), /HTTP status 409, code batches_not_finished/)
  const text = problemDocs.batches_not_finished
  const plain = (s: string) => s.replace(/`/g, '')
  assert.equal(await seen(page.locator('h2:has-text("What causes it") + p')), plain(text.cause))
  assert.equal(await seen(page.locator('h2:has-text("How to fix it") + p')), plain(text.fix))
  assert.equal(await seen(page.locator('h2:has-text("Retrying the identical request") + p')), plain(text.retry))

  await page.getByRole('link', { name: 'All problem types' }).click()
  await page.waitForURL(`${base}/docs/problems`)
  assert.equal(await seen(page.locator('h1')), 'Problem types')
  await page.close()
})
