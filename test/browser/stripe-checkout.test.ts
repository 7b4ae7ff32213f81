import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { type Browser, chromium } from 'playwright-core'
import { chromiumPath, seen, skipWithoutChromium } from '../helpers/browser.ts'
import { freePort } from '../helpers/service-process.ts'
import { eventOf, type StripePayable, type StripeTest, startStripeTest, stripePayable, webhookSecretFor } from '../helpers/stripe.ts'

/**
 * The whole Stripe path in a real browser (issue 22 item 5, issue 32's read-back): Debian's chromium through
 * playwright-core, the service on a real port (PUBLIC_BASE_URL is that port, so Stripe's return URL reaches it), the
 * Stripe stand-in's Checkout page standing in for Stripe's. Two flows:
 * - by card: the debtor pays and comes back; the page reads the session back from the provider before it answers,
 *   so it says "Payment received" with no event delivered yet; Stripe's event, arriving later, changes nothing;
 * - by bank account (an asynchronous method): back on the page it says "Payment processing" (the read-back finds
 *   the session complete and unpaid) and reloads itself; once the debit succeeds and Stripe's event is delivered
 *   (signed, to the webhook URL, over HTTP), the page says "Payment received".
 * Skipped where no chromium is installed.
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

async function openAndPay(p: StripePayable, button: 'Pay' | 'Pay by bank account') {
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
  await page.getByRole('button', { name: button, exact: true }).click()
  await page.waitForURL(`${base}${p.path}?checkout=${sessionId}`)
  return { page, sessionId, violations }
}

async function deliverEvent(p: StripePayable, type: string) {
  const provider = await s.t.admin('GET', `/admin/v1/clients/${p.client}/payment-provider`)
  assert.equal(provider.json.webhookUrl, `${base}/providers/stripe/webhooks/${p.client}`)
  const delivered = await s.stripe.deliver(eventOf(s.stripe.events(), type), provider.json.webhookUrl, webhookSecretFor(p.client))
  assert.equal(delivered.status, 200, delivered.body)
}

async function requestOf(p: StripePayable) {
  const request = (await s.t.call('GET', `/v1/clients/${p.client}/payment-requests/${p.requestId}`, { key: p.apiKey })).json
  return [request.status, request.payment?.provider, request.payment?.amount.amount]
}

test('by card: page, Pay, Stripe Checkout, back to "Payment received" read back from Stripe; the late event changes nothing', {
  skip,
}, async () => {
  const p = await stripePayable(s, 'bs-card')
  const { page, violations } = await openAndPay(p, 'Pay')
  // No event was delivered: the page's read-back settled the session.
  assert.equal(await seen(page.getByRole('heading', { level: 1 })), 'Payment received')
  assert.equal(await page.getByRole('button').count(), 0)
  assert.match(await seen(page.locator('.notice-success')), /^Thank you\. Your payment of \$30\.00 to .* was received/)
  assert.deepEqual(await requestOf(p), ['confirmed', 'stripe', '30.00'])

  await deliverEvent(p, 'checkout.session.completed')
  await page.reload()
  assert.equal(await seen(page.getByRole('heading', { level: 1 })), 'Payment received')
  assert.deepEqual(await requestOf(p), ['confirmed', 'stripe', '30.00'])
  assert.deepEqual(violations, [])
  await page.close()
})

test('by bank account: back to "Payment processing", the debit succeeds, the event, "Payment received"', { skip }, async () => {
  const p = await stripePayable(s, 'bs-bank')
  const { page, sessionId, violations } = await openAndPay(p, 'Pay by bank account')
  assert.equal(await seen(page.getByRole('heading', { level: 1 })), 'Payment processing')
  assert.equal(await page.getByRole('button').count(), 0)
  assert.deepEqual(await requestOf(p), ['open', undefined, undefined])

  s.stripe.completeSession(sessionId, { outcome: 'async_succeeded' })
  await deliverEvent(p, 'checkout.session.async_payment_succeeded')
  // The page reloads itself (Refresh header) and shows the outcome.
  await page.getByRole('heading', { level: 1, name: 'Payment received' }).waitFor({ timeout: 15_000 })
  assert.match(await seen(page.locator('.notice-success')), /^Thank you\. Your payment of \$30\.00 to .* was received/)
  assert.deepEqual(await requestOf(p), ['confirmed', 'stripe', '30.00'])
  assert.deepEqual(violations, [])
  await page.close()
})
