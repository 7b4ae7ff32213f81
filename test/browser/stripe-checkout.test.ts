import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { type Browser, chromium } from 'playwright-core'
import { chromiumPath, seen, skipWithoutChromium } from '../helpers/browser.ts'
import { freePort } from '../helpers/service-process.ts'
import { eventOf, type StripeTest, startStripeTest, stripePayable, webhookSecretFor } from '../helpers/stripe.ts'

/**
 * The whole Stripe path in a real browser (issue 22 item 5): Debian's chromium through playwright-core, the service
 * on a real port (PUBLIC_BASE_URL is that port, so Stripe's return URL reaches it), the Stripe stand-in's Checkout
 * page standing in for Stripe's. The debtor opens the page, presses Pay, lands on the stand-in's checkout page,
 * pays, comes back to the page before Stripe's event ("Payment processing", reloading itself), and, once the event
 * is delivered (signed, to the webhook URL, over HTTP), the page says "Payment received". Skipped where no chromium
 * is installed.
 */
const executablePath = chromiumPath
const skip = skipWithoutChromium

let s: StripeTest
let browser: Browser
let base: string

before(async () => {
  if (!executablePath) return
  const port = await freePort()
  base = `http://127.0.0.1:${port}`
  s = await startStripeTest({ env: { PUBLIC_BASE_URL: base } })
  await s.t.app.app.listen({ host: '127.0.0.1', port })
  browser = await chromium.launch({ executablePath })
})
after(async () => {
  await browser?.close()
  await s?.close()
})

test('page, Pay, Stripe Checkout, back to "processing", the event, "Payment received"', { skip }, async () => {
  const p = await stripePayable(s, 'bs-pay')
  const page = await browser.newPage()
  const violations: string[] = []
  page.on('console', (message) => {
    if (/Content Security Policy/i.test(message.text())) violations.push(message.text())
  })
  await page.goto(`${base}${p.path}`)
  assert.equal(await seen(page.getByRole('heading', { level: 1 })), 'Payment request')
  assert.equal(await page.getByRole('button').count(), 1)
  await page.getByRole('button', { name: 'Pay $30.00', exact: true }).click()

  // The stand-in's Checkout page, at the session's url.
  await page.waitForURL(new RegExp(`^${s.stripe.url}/checkout/cs_test_`))
  const sessionId = new URL(page.url()).pathname.split('/').pop() as string
  assert.equal(await seen(page.locator('#amount')), '3000')
  assert.equal(await seen(page.locator('#currency')), 'usd')
  await page.getByRole('button', { name: 'Pay', exact: true }).click()

  // Back on the service's page, before Stripe's event: processing.
  await page.waitForURL(`${base}${p.path}?checkout=${sessionId}`)
  assert.equal(await seen(page.getByRole('heading', { level: 1 })), 'Payment processing')
  assert.equal(await page.getByRole('button').count(), 0)

  // Stripe's event, signed, over HTTP to the webhook URL the operator's GET gives.
  const provider = await s.t.admin('GET', `/admin/v1/clients/${p.client}/payment-provider`)
  assert.equal(provider.json.webhookUrl, `${base}/providers/stripe/webhooks/${p.client}`)
  const completed = eventOf(s.stripe.events(), 'checkout.session.completed')
  const delivered = await s.stripe.deliver(completed, provider.json.webhookUrl, webhookSecretFor(p.client))
  assert.equal(delivered.status, 200, delivered.body)

  // The page reloads itself (Refresh header) and shows the outcome.
  await page.getByRole('heading', { level: 1, name: 'Payment received' }).waitFor({ timeout: 15_000 })
  assert.match(await seen(page.locator('.notice-success')), /^Thank you\. Your payment of \$30\.00 to .* was received/)
  const request = (await s.t.call('GET', `/v1/clients/${p.client}/payment-requests/${p.requestId}`, { key: p.apiKey })).json
  assert.deepEqual([request.status, request.payment.provider, request.payment.amount.amount], ['confirmed', 'stripe', '30.00'])
  assert.deepEqual(violations, [])
  await page.close()
})
