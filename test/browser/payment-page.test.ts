import assert from 'node:assert/strict'
import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { after, before, test } from 'node:test'
import axe from 'axe-core'
import { type Browser, chromium, type Page } from 'playwright-core'
import { startTestApp, type Tenant, type TestApp } from '../helpers/app.ts'
import { chromiumPath, seen, skipWithoutChromium } from '../helpers/browser.ts'
import { CREDITOR, PAGE_CSP as CSP, pageRequest } from '../helpers/payments.ts'

/**
 * The hosted payment page in a real browser: Debian's chromium driven by playwright-core (no browser
 * download), against the service on a real port. A debtor opens the page, pays and sees the confirmation;
 * expired, held and canceled requests show no form, and a balance changed since the page opened cancels the request; the CSP holds (the stylesheet applies, nothing inline runs or
 * applies, no framing). Skipped, with the reason, where no chromium binary is installed.
 */
const executablePath = chromiumPath
const skip = skipWithoutChromium

/** Where the screenshots go, for a person to look at (test-output/ is git-ignored). */
const SCREENSHOTS = process.env.PAYMENT_PAGE_SCREENSHOTS ?? join(import.meta.dirname, '..', '..', 'test-output', 'payment-page')

/** The widths every state is looked at: a phone's and a laptop's. */
const WIDTHS = [375, 1280] as const

/** The branding every client of this file has (but the CSP test's): its name is the one the tests expect. */
const BRANDING = {
  displayName: CREDITOR,
  accentColor: '#0f5132',
  supportEmail: 'help@lakeside-cu.example',
  supportPhone: '+1 (555) 010-0199',
  supportUrl: 'https://lakeside-cu.example/help',
  locale: 'en-US',
}

/** States captured so far, by name: the last test checks that none is missing. */
const captured = new Set<string>()

/**
 * One state of the page, looked at the way a reviewer would: at each width a full-page screenshot
 * (`<state>-<width>.png`) and an accessibility check with axe-core (WCAG 2.x A and AA, best practices),
 * which must find nothing. axe is put into the page by playwright's evaluate (not page script, so the CSP,
 * which refuses every script, still holds for the page itself).
 */
async function lookAt(page: Page, state: string): Promise<void> {
  const before = page.viewportSize()
  for (const width of WIDTHS) {
    await page.setViewportSize({ width, height: width === 375 ? 740 : 800 })
    await page.screenshot({ path: join(SCREENSHOTS, `${state}-${width}.png`), fullPage: true })
    await page.evaluate(axe.source)
    const results = (await page.evaluate(() =>
      (window as unknown as { axe: typeof axe }).axe.run(document, {
        runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'wcag22aa', 'best-practice'] },
      }),
    )) as axe.AxeResults
    const found = results.violations.map((v) => `${v.id} (${v.impact}): ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`)
    assert.deepEqual(found, [], `${state} at ${width}px`)
    assert.ok(results.passes.length > 10, `axe ran its checks on ${state}`)
    // Nothing is wider than the screen: no sideways scrolling on a phone.
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth)
    assert.equal(overflow, 0, `${state} at ${width}px scrolls sideways`)
  }
  await page.setViewportSize(before ?? { width: 1280, height: 720 })
  captured.add(state)
}

/** The support contact, as every state of a branded page shows it. */
async function assertContact(page: Page): Promise<void> {
  const contact = page.getByRole('region', { name: 'Questions about this payment?' })
  assert.equal(
    (await seen(contact)).replace(/\s+/g, ' '),
    `Questions about this payment? Contact ${CREDITOR}: Email help@lakeside-cu.example Phone +1 (555) 010-0199 Web lakeside-cu.example/help`,
  )
  assert.equal(await contact.getByRole('link', { name: '+1 (555) 010-0199' }).getAttribute('href'), 'tel:+15550100199')
}

let now = new Date('2026-11-23T12:00:00.000Z')
const clock = { now: () => now }

let t: TestApp
let browser: Browser
let base: string

before(async () => {
  if (!executablePath) return
  mkdirSync(SCREENSHOTS, { recursive: true })
  t = await startTestApp({}, { clock })
  base = await t.app.app.listen({ host: '127.0.0.1', port: 0 })
  browser = await chromium.launch({ executablePath })
})
after(async () => {
  await browser?.close()
  await t?.close()
})

interface Payable {
  tenant: Tenant
  client: string
  receivableId: string
  requestId: string
  url: string
}

/** A client named CREDITOR, a Receivable free of holds (USD 100.00) and an open request for $30.00. */
async function payable(client: string, body: Record<string, unknown> = {}, branded = true): Promise<Payable> {
  const { hostedUrl, ...made } = await pageRequest(t, client, body)
  if (branded) assert.equal((await t.admin('PUT', `/admin/v1/clients/${client}/branding`, BRANDING)).status, 200)
  // hostedUrl is absolute on PUBLIC_BASE_URL (http://irs.test); the browser reaches the same path here.
  return { ...made, url: `${base}${hostedUrl.pathname}` }
}

const readRequest = async (p: Payable) =>
  (await t.call('GET', `/v1/clients/${p.client}/payment-requests/${p.requestId}`, { key: p.tenant.apiKey })).json
const readPosition = async (p: Payable) =>
  (await t.call('GET', `/v1/clients/${p.client}/receivables/${p.receivableId}`, { key: p.tenant.apiKey })).json.financialPosition
const usd = (amount: string) => ({ amount, currency: 'USD' })

/** A page that records every console message about the Content Security Policy, and every script error. */
async function openPage(): Promise<{ page: Page; violations: string[]; errors: string[] }> {
  const page = await browser.newPage()
  const violations: string[] = []
  const errors: string[] = []
  page.on('console', (message) => {
    if (/Content Security Policy/i.test(message.text())) violations.push(message.text())
  })
  page.on('pageerror', (err) => errors.push(err.message))
  return { page, violations, errors }
}

test('a debtor opens the page, sees what is asked, pays and sees the confirmation', { skip }, async () => {
  now = new Date('2026-11-23T12:00:00.000Z')
  const p = await payable('bp-pay')
  const { page, violations, errors } = await openPage()
  const response = await page.goto(p.url)
  assert.equal(response?.status(), 200)
  const headers = response?.headers() ?? {}
  assert.equal(headers['content-security-policy'], CSP)
  assert.equal(headers['referrer-policy'], 'no-referrer')
  assert.equal(headers['cache-control'], 'no-store')
  assert.equal(headers['x-frame-options'], 'DENY')
  assert.equal(headers['content-type'], 'text/html; charset=utf-8')

  assert.equal(await page.title(), `Payment request · ${CREDITOR}`)
  assert.equal(await page.getAttribute('html', 'lang'), 'en')
  assert.equal(await page.getByRole('main').count(), 1)
  assert.equal(await seen(page.getByRole('heading', { level: 1 })), 'Payment request')
  // The page's one h1, and the contact section's h2.
  assert.equal(await page.getByRole('heading').count(), 2)
  assert.equal(await seen(page.locator('.creditor')), `Payment requested by ${CREDITOR}`)
  await assertContact(page)
  assert.equal(await page.getAttribute('link[rel="icon"]', 'href'), '/favicon.ico')
  const icon = await page.request.get(`${base}/favicon.ico`)
  assert.deepEqual([icon.status(), icon.headers()['content-type']], [200, 'image/x-icon'])
  assert.equal(await seen(page.locator('.summary dd.amount')), '$30.00')
  assert.ok(await page.getByText('February instalment', { exact: true }).isVisible())
  assert.ok(await page.getByText('30 November 2026 at 12:00 UTC', { exact: true }).isVisible())
  assert.match(await seen(page.locator('.notice-sandbox')), /^Sandbox\. This is a test payment page and no money moves/)

  // Two real buttons, named by their text, operable without any script (the page has none).
  assert.equal(await page.locator('script').count(), 0)
  assert.equal(await page.getByRole('button').count(), 2)
  const pay = page.getByRole('button', { name: 'Pay $30.00', exact: true })
  assert.ok(await pay.isVisible())
  assert.ok(await page.getByRole('button', { name: 'Simulate a failed payment', exact: true }).isVisible())

  // The stylesheets applied (allowed by style-src 'self'): the Pay button's colours come from the client's accent.
  const style = await pay.evaluate((el) => {
    const s = getComputedStyle(el)
    return { background: s.backgroundColor, color: s.color, width: el.getBoundingClientRect().width }
  })
  assert.equal(style.background, 'rgb(15, 81, 50)')
  assert.equal(style.color, 'rgb(255, 255, 255)')
  assert.ok(style.width > 200, `the button spans the card: ${style.width}px`)
  /** Where the description's value sits against its label, and how it is aligned. */
  const description = () =>
    page.locator('.summary div', { hasText: 'Description' }).evaluate((row) => {
      const [dt, dd] = [row.querySelector('dt'), row.querySelector('dd')] as [Element, Element]
      const [l, v] = [dt.getBoundingClientRect(), dd.getBoundingClientRect()]
      return { align: getComputedStyle(dd).textAlign, below: v.top >= l.bottom - 1, valueLeft: Math.round(v.left - l.left) }
    })
  // A laptop: label and value on one line, the value on the right.
  assert.deepEqual({ ...(await description()), valueLeft: undefined }, { align: 'right', below: false, valueLeft: undefined })
  // A phone's width: the card fills the screen, the buttons still span it, and each value sits under its label,
  // read from the left.
  await page.setViewportSize({ width: 375, height: 740 })
  const narrow = (await pay.boundingBox())?.width ?? 0
  assert.ok(narrow > 300, `the button spans the screen: ${narrow}px`)
  assert.deepEqual(await description(), { align: 'left', below: true, valueLeft: 0 })
  await page.setViewportSize({ width: 1280, height: 720 })
  await lookAt(page, 'payable')

  now = new Date('2026-11-23T12:03:00.000Z')
  await pay.click()
  await page.waitForURL(p.url)
  await page.getByRole('heading', { level: 1, name: 'Payment received' }).waitFor()
  assert.equal(await page.title(), `Payment received · ${CREDITOR}`)
  assert.equal(
    await seen(page.locator('.notice-success')),
    `Thank you. Your payment of $30.00 to ${CREDITOR} was received on 23 November 2026 at 12:03 UTC.`,
  )
  assert.equal(await page.getByRole('button').count(), 0)
  assert.equal(await page.locator('form').count(), 0)
  // The provider's payment id is the debtor's confirmation number.
  const { providerPaymentId } = (await readRequest(p)).payment
  assert.equal(await seen(page.locator('.summary dd.confirmation')), providerPaymentId)
  await assertContact(page)
  await lookAt(page, 'confirmed')

  // Reloading the confirmation (post/redirect/get) submits nothing again.
  const reloaded = await page.reload()
  assert.equal(reloaded?.request().method(), 'GET')
  assert.equal(reloaded?.status(), 200)

  const request = await readRequest(p)
  assert.equal(request.status, 'confirmed')
  assert.equal(request.payment.status, 'confirmed')
  assert.equal(request.payment.decidedAt, '2026-11-23T12:03:00.000Z')
  assert.deepEqual(await readPosition(p), {
    sourceAmount: usd('100.00'),
    workingAmount: usd('70.00'),
    confirmedUnreconciledAmount: usd('30.00'),
    receiptAcknowledgedAmount: usd('0.00'),
  })
  assert.deepEqual(violations, [])
  assert.deepEqual(errors, [])
  await page.close()
})

test('the failure simulation, operated from the keyboard, shows "Payment failed" and no form', { skip }, async () => {
  now = new Date('2026-11-23T13:00:00.000Z')
  const p = await payable('bp-fail')
  const { page, violations } = await openPage()
  await page.goto(p.url)
  // Tab reaches the buttons in order: Pay first, then the failure simulation.
  await page.keyboard.press('Tab')
  assert.equal(await page.evaluate(() => document.activeElement?.textContent), 'Pay $30.00')
  await page.keyboard.press('Tab')
  assert.equal(await page.evaluate(() => document.activeElement?.textContent), 'Simulate a failed payment')
  await page.keyboard.press('Enter')
  await page.getByRole('heading', { level: 1, name: 'Payment failed' }).waitFor()
  assert.match(await seen(page.locator('.notice-error')), /^The payment did not go through, and nothing was charged\./)
  assert.equal(await page.getByRole('button').count(), 0)
  assert.equal((await readRequest(p)).status, 'failed')
  assert.deepEqual((await readPosition(p)).workingAmount, usd('100.00'))
  await assertContact(page)
  await lookAt(page, 'failed')
  assert.deepEqual(violations, [])
  await page.close()
})

test('an expired request shows a clear page with no form', { skip }, async () => {
  now = new Date('2026-11-23T14:00:00.000Z')
  const p = await payable('bp-expired', { expiresAt: '2026-11-23T14:10:00Z' })
  now = new Date('2026-11-23T14:11:00.000Z')
  const { page, violations } = await openPage()
  const response = await page.goto(p.url)
  assert.equal(response?.status(), 200)
  assert.equal(await seen(page.getByRole('heading', { level: 1 })), 'This payment request has expired')
  assert.equal(await page.getByRole('button').count(), 0)
  assert.equal(await page.locator('form').count(), 0)
  assert.ok(await page.getByText('23 November 2026 at 14:10 UTC', { exact: true }).isVisible())
  await assertContact(page)
  await lookAt(page, 'expired')
  assert.equal((await readRequest(p)).status, 'expired')
  assert.deepEqual(violations, [])
  await page.close()
})

test('a held request (a dispute raised after it was made) shows a clear page with no form', { skip }, async () => {
  now = new Date('2026-11-23T15:00:00.000Z')
  const p = await payable('bp-held')
  const { page, violations } = await openPage()
  await page.goto(p.url)
  assert.equal(await page.getByRole('button').count(), 2)

  const dispute = await t.call('PUT', `/v1/clients/${p.client}/receivables/${p.receivableId}`, {
    key: p.tenant.apiKey,
    body: {
      financialType: 'loan_balance',
      sourceRevision: 2,
      recoverableAmount: usd('100.00'),
      creditUnion: { loanAccountReference: `loan/${p.receivableId}`, loanType: 'auto' },
      dueDate: '2026-01-01',
      responsibleCustomers: [{ externalCustomerId: 'pay-cust', role: 'primary' }],
      sourceReference: `rcv/${p.receivableId}`,
      restrictions: [{ type: 'dispute' }],
    },
  })
  assert.equal(dispute.status, 200, dispute.body)

  // The form still open in the browser is refused with a clear page (409), and nothing is paid.
  const [submitted] = await Promise.all([
    page.waitForResponse((r) => r.request().method() === 'POST'),
    page.getByRole('button', { name: 'Pay $30.00' }).click(),
  ])
  assert.equal(submitted.status(), 409)
  await page.getByRole('heading', { level: 1, name: 'This payment request is on hold' }).waitFor()
  assert.match(await seen(page.locator('.notice-error')), /^Your payment was not made: this payment request is on hold\.$/)
  assert.equal(await page.getByRole('button').count(), 0)
  await assertContact(page)
  await lookAt(page, 'refused-held')

  const response = await page.goto(p.url)
  assert.equal(response?.status(), 200)
  assert.equal(await seen(page.getByRole('heading', { level: 1 })), 'This payment request is on hold')
  assert.equal(await page.getByRole('button').count(), 0)
  assert.equal(await page.locator('form').count(), 0)
  await assertContact(page)
  await lookAt(page, 'held')
  assert.equal((await readRequest(p)).status, 'open')
  assert.deepEqual((await readPosition(p)).workingAmount, usd('100.00'))
  assert.deepEqual(violations, [])
  await page.close()
})

test('a request the creditor canceled shows a clear page with no form', { skip }, async () => {
  now = new Date('2026-11-23T15:30:00.000Z')
  const p = await payable('bp-canceled')
  const canceled = await t.call('POST', `/v1/clients/${p.client}/payment-requests/${p.requestId}/cancel`, {
    key: p.tenant.apiKey,
    body: { reason: 'Sent in error' },
  })
  assert.equal(canceled.status, 200, canceled.body)
  const { page, violations } = await openPage()
  const response = await page.goto(p.url)
  assert.equal(response?.status(), 200)
  assert.equal(await seen(page.getByRole('heading', { level: 1 })), 'This payment request was canceled')
  assert.equal(
    await seen(page.locator('.notice-info')),
    `${CREDITOR} canceled it: it can no longer be paid, and nothing has been charged. Contact ${CREDITOR} if you have questions.`,
  )
  assert.equal(await page.getByRole('button').count(), 0)
  assert.equal(await page.locator('form').count(), 0)
  // The integrator's note is not the debtor's to read.
  assert.equal(await page.getByText('Sent in error').count(), 0)
  await assertContact(page)
  await lookAt(page, 'canceled')
  assert.deepEqual(violations, [])
  await page.close()
})

test('a balance that changed after the page was opened: Pay cancels the request, charges nothing and says why', { skip }, async () => {
  now = new Date('2026-11-23T15:40:00.000Z')
  const p = await payable('bp-balance', { amount: { amount: '80.00', currency: 'USD' } })
  const { page, violations } = await openPage()
  await page.goto(p.url)
  assert.equal(await page.getByRole('button').count(), 2)

  const note = await t.call('PUT', `/v1/clients/${p.client}/credit-notes/cn-bp-balance`, {
    key: p.tenant.apiKey,
    body: {
      type: 'credit_note',
      amount: usd('30.00'),
      externalReceivableId: p.receivableId,
      sourceRevision: 2,
      effectiveAt: '2026-11-23T00:00:00Z',
      reason: 'billing_correction',
      sourceReference: 'ledger/cn/bp',
    },
  })
  assert.equal(note.status, 201, note.body)

  await Promise.all([page.waitForURL(p.url), page.getByRole('button', { name: 'Pay $80.00' }).click()])
  await page.getByRole('heading', { level: 1, name: 'The balance has changed' }).waitFor()
  assert.equal(
    await seen(page.locator('.notice-info')),
    `The amount owed changed since this payment request was made, so it was canceled and nothing has been charged. Ask ${CREDITOR} for a new payment request.`,
  )
  assert.equal(await page.getByRole('button').count(), 0)
  await assertContact(page)
  await lookAt(page, 'balance-changed')
  const request = await readRequest(p)
  assert.deepEqual([request.status, request.cancelReason, request.payment], ['canceled', 'balance_changed', null])
  assert.deepEqual(await readPosition(p), {
    sourceAmount: usd('70.00'),
    workingAmount: usd('70.00'),
    confirmedUnreconciledAmount: usd('0.00'),
    receiptAcknowledgedAmount: usd('0.00'),
  })
  assert.deepEqual(violations, [])
  await page.close()
})

test('an unknown token is a 404 page', { skip }, async () => {
  const { page, violations } = await openPage()
  const response = await page.goto(`${base}/pay/${'A'.repeat(43)}`)
  assert.equal(response?.status(), 404)
  assert.equal(await seen(page.getByRole('heading', { level: 1 })), 'Payment request not found')
  assert.equal(await page.getByRole('button').count(), 0)
  await lookAt(page, 'not-found')
  assert.deepEqual(violations, [])
  await page.close()
})

test('the CSP holds: nothing inline applies or runs, and no other site may frame the page', { skip }, async () => {
  now = new Date('2026-11-23T16:00:00.000Z')
  const p = await payable('bp-csp', {}, false)
  const { page, violations } = await openPage()
  await page.goto(p.url)
  // Playwright's evaluate is not page script; what it inserts is, and the browser must refuse it.
  const outcome = await page.evaluate(async () => {
    const style = document.createElement('style')
    style.textContent = 'h1 { color: rgb(255, 0, 0) }'
    document.head.append(style)
    const script = document.createElement('script')
    script.textContent = 'document.body.dataset.ran = "yes"'
    document.body.append(script)
    await new Promise((resolve) => setTimeout(resolve, 100))
    return { h1: getComputedStyle(document.querySelector('h1') as Element).color, ran: document.body.dataset.ran ?? 'no' }
  })
  assert.notEqual(outcome.h1, 'rgb(255, 0, 0)')
  assert.equal(outcome.ran, 'no')
  assert.ok(
    violations.some((v) => v.includes("style-src 'self'")),
    violations.join('\n'),
  )
  assert.ok(
    violations.some((v) => v.includes('script')),
    violations.join('\n'),
  )

  // Framed from another origin, the page is refused (frame-ancestors 'none').
  const framing = await openPage()
  await framing.page.setContent(`<iframe src="${p.url}" title="payment"></iframe>`)
  await framing.page.waitForTimeout(500)
  const framed = framing.page.frames().find((f) => f !== framing.page.mainFrame())
  // Chromium replaces the refused frame with its own error document: the page never renders there.
  assert.equal(framed?.url(), 'chrome-error://chromewebdata/')
  assert.equal(await framed?.getByText('Payment requested by').count(), 0)
  assert.ok(
    framing.violations.some((v) => v.includes("frame-ancestors 'none'")),
    framing.violations.join('\n'),
  )
  await framing.page.close()
  await page.close()
})

test('without branding and in production: the default look, no contact section, no form', { skip }, async () => {
  now = new Date('2026-11-23T16:30:00.000Z')
  const plain = await payable('bp-plain', {}, false)
  const { page, violations } = await openPage()
  await page.goto(plain.url)
  assert.equal(await page.getByRole('heading').count(), 1)
  assert.equal(await page.getByRole('region').count(), 0)
  const pay = page.getByRole('button', { name: 'Pay $30.00', exact: true })
  assert.equal(await pay.evaluate((el) => getComputedStyle(el).backgroundColor), 'rgb(29, 78, 216)')
  await lookAt(page, 'payable-unbranded')
  assert.deepEqual(violations, [])

  // Production on the same database: no payment provider configured, so no form; the branded contact stays.
  const prod = await startTestApp({ SERVICE_ENVIRONMENT: 'production' }, { clock, db: t.db })
  try {
    const prodBase = await prod.app.app.listen({ host: '127.0.0.1', port: 0 })
    const p = await pageRequest(prod, 'bp-prod')
    assert.equal((await prod.admin('PUT', '/admin/v1/clients/bp-prod/branding', BRANDING)).status, 200)
    await page.goto(`${prodBase}${p.hostedUrl.pathname}`)
    assert.match(await seen(page.locator('.notice-info')), /^Online payment is not available yet: no payment provider is configured\./)
    assert.equal(await page.locator('form').count(), 0)
    await assertContact(page)
    await lookAt(page, 'no-provider')
  } finally {
    await page.close()
    await prod.close()
  }
})

test('every state was looked at, at both widths, with no accessibility violation', { skip }, () => {
  assert.deepEqual([...captured].sort(), [
    'balance-changed',
    'canceled',
    'confirmed',
    'expired',
    'failed',
    'held',
    'no-provider',
    'not-found',
    'payable',
    'payable-unbranded',
    'refused-held',
  ])
})
