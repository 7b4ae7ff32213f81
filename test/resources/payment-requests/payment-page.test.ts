import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import Fastify from 'fastify'
import {
  FORM_BODY_LIMIT_BYTES,
  formatAmount,
  formatTime,
  PAGE_HEADERS,
  registerPaymentPage,
} from '../../../src/resources/payment-requests/page.ts'
import { PAGE_STYLE } from '../../../src/resources/payment-requests/page-style.ts'
import { type Response, startTestApp, type Tenant, type TestApp } from '../../helpers/app.ts'
import { CREDITOR, PAGE_CSP as CSP, pageRequest, payableReceivable } from '../../helpers/payments.ts'

/**
 * The hosted payment page (docs/decisions.md, "Hosted page") through the real app: every state's page,
 * its headers, the sandbox form's post/redirect/get and every refusal, as HTML pages and never problem+json.
 */

const FORM = 'application/x-www-form-urlencoded'
const WELL_FORMED_UNKNOWN = 'A'.repeat(43)

let now = new Date('2026-11-23T12:00:00.000Z')
const clock = { now: () => now }
/** The clock only moves forward through the file: each test starts at its own later hour. */
const at = (iso: string) => {
  assert.ok(Date.parse(iso) >= now.getTime(), `the clock moves only forward (${iso})`)
  now = new Date(iso)
}

let t: TestApp
let prod: TestApp
before(async () => {
  t = await startTestApp({}, { clock })
  // The production deployment on the same database: no provider, so no form.
  prod = await startTestApp({ SERVICE_ENVIRONMENT: 'production' }, { clock, db: t.db })
})
after(async () => {
  await prod?.close()
  await t?.close()
})

/** The page's text as a reader gets it: tags dropped, entities decoded, white space collapsed. */
function visibleText(html: string): string {
  const body = html.slice(html.indexOf('<body>'))
  return body
    .replace(/<[^>]+>/g, ' ')
    .replace(/&#(\d+);/g, (_, n: string) => String.fromCharCode(Number(n)))
    .replace(/\s+/g, ' ')
    .trim()
}

const count = (html: string, needle: string) => html.split(needle).length - 1
const h1 = (html: string) => /<h1>([^<]*)<\/h1>/.exec(html)?.[1]
const title = (html: string) => /<title>([^<]*)<\/title>/.exec(html)?.[1]

/** Every answer under /pay carries exactly these (docs/decisions.md), besides the service's own two. */
function assertPageHeaders(res: Response, contentType = 'text/html; charset=utf-8') {
  for (const [name, value] of Object.entries(PAGE_HEADERS)) assert.equal(res.headers[name], value, name)
  assert.equal(res.headers['content-security-policy'], CSP)
  assert.equal(res.headers['referrer-policy'], 'no-referrer')
  assert.equal(res.headers['cache-control'], 'no-store')
  assert.equal(res.headers['x-content-type-options'], 'nosniff')
  assert.equal(res.headers['x-frame-options'], 'DENY')
  assert.equal(res.headers['content-type'], contentType)
  assert.equal(res.headers['service-api-version'], 'v1')
  assert.match(String(res.headers['x-request-id']), /^[0-9a-f-]{36}$/)
  assert.equal(res.headers['set-cookie'], undefined)
}

/** An HTML page of the given status with the given h1, with the page headers and no form. */
function assertMessagePage(res: Response, status: number, heading: string) {
  assert.equal(res.status, status, res.body)
  assertPageHeaders(res)
  assert.equal(h1(res.body), heading)
  assert.equal(count(res.body, '<form'), 0)
  assert.equal(count(res.body, '<script'), 0)
}

interface Payable {
  tenant: Tenant
  client: string
  receivableId: string
  requestId: string
  path: string
}

/** A client named CREDITOR, a Receivable free of holds (USD 100.00) and one open request on it. */
async function payable(app: TestApp, client: string, body: Record<string, unknown> = {}): Promise<Payable> {
  const { hostedUrl: hosted, ...made } = await pageRequest(app, client, body)
  assert.equal(hosted.origin, 'http://irs.test')
  assert.match(hosted.pathname, /^\/pay\/[A-Za-z0-9_-]{43}$/)
  return { ...made, path: hosted.pathname }
}

const readRequest = (app: TestApp, p: Payable) =>
  app.call('GET', `/v1/clients/${p.client}/payment-requests/${p.requestId}`, { key: p.tenant.apiKey })
const readPosition = async (app: TestApp, p: Payable) =>
  (await app.call('GET', `/v1/clients/${p.client}/receivables/${p.receivableId}`, { key: p.tenant.apiKey })).json.financialPosition
const usd = (amount: string) => ({ amount, currency: 'USD' })
const UNTOUCHED = {
  sourceAmount: usd('100.00'),
  workingAmount: usd('100.00'),
  confirmedUnreconciledAmount: usd('0.00'),
  receiptAcknowledgedAmount: usd('0.00'),
}

const submit = (app: TestApp, path: string, body: string, contentType = FORM) => app.call('POST', path, { rawBody: body, contentType })

/** Nothing on the page names the Customer, the Receivable, the request id or any balance. */
function assertNothingPrivate(html: string, p: Payable) {
  for (const secret of ['Pat', 'Payer', 'pay-cust', p.receivableId, p.requestId, p.client, 'loan/', 'rcv/', '100.00', '70.00']) {
    assert.equal(html.includes(secret), false, `the page shows ${secret}`)
  }
}

describe('the page of each state', () => {
  test('payable in sandbox: creditor, amount, description, expiry, the sandbox note and a form of two labelled buttons', async () => {
    at('2026-11-23T12:00:00.000Z')
    const p = await payable(t, 'pp-open')
    const res = await t.call('GET', p.path)
    assert.equal(res.status, 200)
    assertPageHeaders(res)
    assert.match(res.body, /^<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">/)
    assert.equal(title(res.body), `Payment request · ${CREDITOR}`)
    assert.equal(h1(res.body), 'Payment request')
    assert.equal(count(res.body, '<h1>'), 1)
    assert.equal(count(res.body, '<main>'), 1)
    assert.equal(count(res.body, '<link rel="stylesheet" href="/pay/assets/page.css">'), 1)
    assert.equal(count(res.body, '<script'), 0)
    assert.equal(count(res.body, ' style='), 0)
    assert.equal(count(res.body, '<style'), 0)
    assert.equal(
      visibleText(res.body),
      `Payment requested by ${CREDITOR} Payment request Amount $30.00 Description February instalment ` +
        'Pay by 30 November 2026 at 12:00 UTC ' +
        'Sandbox. This is a test payment page and no money moves: the buttons below only simulate what a payment provider would report. ' +
        'Pay $30.00 Simulate a failed payment',
    )
    assert.equal(count(res.body, '<form'), 1)
    assert.ok(res.body.includes(`<form method="post" action="${p.path}">`))
    assert.ok(res.body.includes('<button type="submit" name="outcome" value="confirmed" class="pay">Pay $30.00</button>'))
    assert.ok(res.body.includes('<button type="submit" name="outcome" value="failed" class="fail">Simulate a failed payment</button>'))
    assert.equal(count(res.body, '<button'), 2)
    assertNothingPrivate(res.body, p)

    // HEAD answers the same headers, without the page.
    const head = await t.call('HEAD', p.path)
    assert.equal(head.status, 200)
    assertPageHeaders(head)
    assert.equal(head.body, '')
  })

  test('without a description the page has no description row; the default expiry is 7 days ahead', async () => {
    at('2026-11-23T13:00:00.000Z')
    const tenant = await t.tenant('pp-plain')
    const receivableId = await payableReceivable(t, tenant, 'rcv-plain', { amount: '2500.00', currency: 'EUR' })
    const res = await t.call('PUT', '/v1/clients/pp-plain/payment-requests/pr-plain', {
      key: tenant.apiKey,
      body: { externalReceivableId: receivableId, amount: { amount: '1234.50', currency: 'EUR' } },
    })
    assert.equal(res.status, 201, res.body)
    const page = await t.call('GET', new URL(res.json.hostedUrl).pathname)
    assert.equal(page.status, 200)
    // A client without a name is shown by its code (that is the name the creditor chose to give it).
    assert.equal(
      visibleText(page.body),
      'Payment requested by pp-plain Payment request Amount €1,234.50 Pay by 30 November 2026 at 13:00 UTC ' +
        'Sandbox. This is a test payment page and no money moves: the buttons below only simulate what a payment provider would report. ' +
        'Pay €1,234.50 Simulate a failed payment',
    )
  })

  test('every value on the page is escaped', async () => {
    at('2026-11-23T14:00:00.000Z')
    const p = await payable(t, 'pp-escape', { description: `Fees <b>"late"</b> & 'more'` })
    assert.equal((await t.admin('PUT', '/admin/v1/clients/pp-escape', { name: `<script>alert(1)</script> & Co` })).status, 200)
    const res = await t.call('GET', p.path)
    assert.equal(res.status, 200)
    assert.equal(count(res.body, '<script'), 0)
    assert.equal(count(res.body, '<b>'), 0)
    assert.ok(res.body.includes('<dd>Fees &#60;b&#62;&#34;late&#34;&#60;/b&#62; &#38; &#39;more&#39;</dd>'))
    assert.ok(res.body.includes('<strong>&#60;script&#62;alert(1)&#60;/script&#62; &#38; Co</strong>'))
    assert.equal(title(res.body), 'Payment request · &#60;script&#62;alert(1)&#60;/script&#62; &#38; Co')
  })

  test('expired: past expiresAt the page says so, with no form; a submission is refused with 409', async () => {
    at('2026-11-23T15:00:00.000Z')
    const p = await payable(t, 'pp-expired', { expiresAt: '2026-11-23T15:10:00Z' })
    assert.equal((await t.call('GET', p.path)).status, 200)
    at('2026-11-23T15:10:01.000Z')
    const res = await t.call('GET', p.path)
    assertMessagePage(res, 200, 'This payment request has expired')
    assert.equal(title(res.body), `This payment request has expired · ${CREDITOR}`)
    assert.equal(
      visibleText(res.body),
      `Payment requested by ${CREDITOR} This payment request has expired ` +
        `It can no longer be paid, and nothing has been charged. Ask ${CREDITOR} for a new payment request. ` +
        'Amount $30.00 Description February instalment Expired on 23 November 2026 at 15:10 UTC',
    )
    assert.equal(count(res.body, '<button'), 0)
    assertNothingPrivate(res.body, p)
    assert.equal((await readRequest(t, p)).json.status, 'expired')

    const refused = await submit(t, p.path, 'outcome=confirmed')
    assertMessagePage(refused, 409, 'This payment request has expired')
    assert.ok(
      visibleText(refused.body).startsWith(
        `Payment requested by ${CREDITOR} This payment request has expired ` +
          'Your payment was not made: this payment request was already settled, canceled or has expired. It can no longer be paid',
      ),
      refused.body,
    )
    assert.equal((await readRequest(t, p)).json.payment, null)
    assert.deepEqual(await readPosition(t, p), UNTOUCHED)
  })

  test('held: a dispute raised after the request was made puts the page on hold, with no form; a submission changes nothing', async () => {
    at('2026-11-23T16:00:00.000Z')
    const p = await payable(t, 'pp-held')
    const dispute = await t.call('PUT', `/v1/clients/pp-held/receivables/${p.receivableId}`, {
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
    const res = await t.call('GET', p.path)
    assertMessagePage(res, 200, 'This payment request is on hold')
    assert.equal(
      visibleText(res.body),
      `Payment requested by ${CREDITOR} This payment request is on hold ` +
        `It cannot be paid now, and nothing has been charged. Contact ${CREDITOR} if you have questions. ` +
        'Amount $30.00 Description February instalment',
    )
    assert.equal(count(res.body, '<button'), 0)
    assertNothingPrivate(res.body, p)

    for (const outcome of ['confirmed', 'failed']) {
      const refused = await submit(t, p.path, `outcome=${outcome}`)
      assertMessagePage(refused, 409, 'This payment request is on hold')
      assert.equal(
        visibleText(refused.body),
        `Payment requested by ${CREDITOR} This payment request is on hold ` +
          'Your payment was not made: this payment request is on hold. ' +
          `It cannot be paid now, and nothing has been charged. Contact ${CREDITOR} if you have questions. ` +
          'Amount $30.00 Description February instalment',
      )
    }
    const request = (await readRequest(t, p)).json
    assert.equal(request.status, 'open')
    assert.equal(request.payment, null)
    const position = await readPosition(t, p)
    assert.deepEqual(position, UNTOUCHED)
  })
})

describe('the sandbox form', () => {
  test('Pay: 303 to the page, which says "Payment received"; the Receivable working amount falls by the amount', async () => {
    at('2026-11-23T17:00:00.000Z')
    const p = await payable(t, 'pp-pay')
    at('2026-11-23T17:04:30.000Z')
    const res = await submit(t, p.path, 'outcome=confirmed')
    assert.equal(res.status, 303)
    assert.equal(res.headers.location, p.path)
    assert.equal(res.body, '')
    for (const [name, value] of Object.entries(PAGE_HEADERS)) assert.equal(res.headers[name], value, name)

    const page = await t.call('GET', p.path)
    assertMessagePage(page, 200, 'Payment received')
    assert.equal(title(page.body), `Payment received · ${CREDITOR}`)
    // The provider's payment id is the debtor's confirmation number.
    const { providerPaymentId } = (await readRequest(t, p)).json.payment
    assert.match(providerPaymentId, /^sbx_[0-9a-f]{32}$/)
    assert.equal(
      visibleText(page.body),
      `Payment requested by ${CREDITOR} Payment received ` +
        `Thank you. Your payment of $30.00 to ${CREDITOR} was received on 23 November 2026 at 17:04 UTC. ` +
        `Amount $30.00 Description February instalment Paid on 23 November 2026 at 17:04 UTC Confirmation number ${providerPaymentId} You can close this page.`,
    )
    assert.equal(count(page.body, '<button'), 0)
    assertNothingPrivate(page.body, p)

    const request = (await readRequest(t, p)).json
    assert.equal(request.status, 'confirmed')
    assert.equal(request.payment.status, 'confirmed')
    assert.equal(request.payment.provider, 'sandbox')
    assert.deepEqual(request.payment.allocatedAmount, usd('30.00'))
    assert.equal(request.payment.decidedAt, '2026-11-23T17:04:30.000Z')
    const moved = {
      sourceAmount: usd('100.00'),
      workingAmount: usd('70.00'),
      confirmedUnreconciledAmount: usd('30.00'),
      receiptAcknowledgedAmount: usd('0.00'),
    }
    assert.deepEqual(await readPosition(t, p), moved)

    // A second Pay (a double click, a resubmitted form) is the same Payment: 303 again, nothing moves twice.
    const again = await submit(t, p.path, 'outcome=confirmed')
    assert.equal(again.status, 303)
    assert.deepEqual(await readPosition(t, p), moved)
    assert.deepEqual((await readRequest(t, p)).json, request)

    // The opposite outcome after the decision is refused, on the page as it stands.
    const refused = await submit(t, p.path, 'outcome=failed')
    assertMessagePage(refused, 409, 'Payment received')
    assert.ok(
      visibleText(refused.body).startsWith(
        `Payment requested by ${CREDITOR} Payment received Your payment was not made: this payment request was already settled, canceled or has expired. Thank you.`,
      ),
    )
    assert.deepEqual(await readPosition(t, p), moved)
  })

  test('Simulate a failed payment: 303 to "Payment failed", with no form; no amount moves', async () => {
    at('2026-11-23T18:00:00.000Z')
    const p = await payable(t, 'pp-fail')
    const res = await submit(t, p.path, 'outcome=failed')
    assert.equal(res.status, 303)
    assert.equal(res.headers.location, p.path)
    const page = await t.call('GET', p.path)
    assertMessagePage(page, 200, 'Payment failed')
    assert.equal(
      visibleText(page.body),
      `Payment requested by ${CREDITOR} Payment failed ` +
        `The payment did not go through, and nothing was charged. This payment request cannot be used again: ask ${CREDITOR} for a new payment request. ` +
        'Amount $30.00 Description February instalment Failed on 23 November 2026 at 18:00 UTC',
    )
    assert.equal(count(page.body, '<button'), 0)
    assertNothingPrivate(page.body, p)
    const request = (await readRequest(t, p)).json
    assert.equal(request.status, 'failed')
    assert.equal(request.payment.status, 'failed')
    assert.deepEqual(await readPosition(t, p), UNTOUCHED)

    // A failed request is not paid afterwards: a new request is needed.
    const refused = await submit(t, p.path, 'outcome=confirmed')
    assertMessagePage(refused, 409, 'Payment failed')
    assert.equal((await readRequest(t, p)).json.status, 'failed')
    assert.deepEqual(await readPosition(t, p), UNTOUCHED)
  })

  test('a malformed submission is a 4xx page, never problem+json, and changes nothing', async () => {
    at('2026-11-23T19:00:00.000Z')
    const p = await payable(t, 'pp-bad')
    const back = `<p><a href="${p.path}">Back to the payment page</a></p>`
    const cases: [string, () => Promise<Response>, number, string][] = [
      ['an unknown outcome', () => submit(t, p.path, 'outcome=maybe'), 400, 'The form was not sent as expected'],
      ['no outcome', () => submit(t, p.path, 'other=confirmed'), 400, 'The form was not sent as expected'],
      ['an empty body', () => submit(t, p.path, ''), 400, 'The form was not sent as expected'],
      ['two outcomes', () => submit(t, p.path, 'outcome=confirmed&outcome=failed'), 400, 'The form was not sent as expected'],
      ['JSON', () => submit(t, p.path, '{"outcome":"confirmed"}', 'application/json'), 415, 'The form was not sent as expected'],
      ['text/plain', () => submit(t, p.path, 'outcome=confirmed', 'text/plain'), 415, 'The form was not sent as expected'],
      [
        'multipart',
        () => submit(t, p.path, 'outcome=confirmed', 'multipart/form-data; boundary=x'),
        415,
        'The form was not sent as expected',
      ],
      [
        'a compressed body',
        () => t.call('POST', p.path, { rawBody: 'outcome=confirmed', contentType: FORM, headers: { 'content-encoding': 'gzip' } }),
        415,
        'The form was not sent as expected',
      ],
      [
        'no content type',
        async () => {
          const r = await t.app.app.inject({ method: 'POST', url: p.path, payload: 'outcome=confirmed' })
          return { status: r.statusCode, headers: r.headers, body: r.body, json: undefined }
        },
        415,
        'The form was not sent as expected',
      ],
      [
        'a body over the limit',
        () => submit(t, p.path, `outcome=confirmed&pad=${'x'.repeat(FORM_BODY_LIMIT_BYTES)}`),
        413,
        'The form was too large',
      ],
    ]
    for (const [what, send, status, heading] of cases) {
      const res = await send()
      assertMessagePage(res, status, heading)
      assert.equal(visibleText(res.body), `${heading} Use the buttons of the payment page. Back to the payment page`, what)
      assert.ok(res.body.includes(back), what)
    }
    // Another method on the page's address: 405, with the methods it takes.
    for (const method of ['PUT', 'DELETE', 'PATCH'] as const) {
      const res = await t.call(method, p.path, { rawBody: 'outcome=confirmed', contentType: FORM })
      assertMessagePage(res, 405, 'Not available')
      assert.equal(res.headers.allow, 'GET, HEAD, POST')
    }
    const request = (await readRequest(t, p)).json
    assert.equal(request.status, 'open')
    assert.equal(request.payment, null)
    assert.deepEqual(await readPosition(t, p), UNTOUCHED)
    assert.equal((await t.call('GET', p.path)).status, 200)
  })
})

describe('unknown and malformed tokens', () => {
  const NOT_FOUND_TEXT =
    'Payment request not found There is no payment request at this address. Check that the link is complete, exactly as you received it.'

  test('GET, HEAD and POST of an unknown or malformed token: the 404 page', async () => {
    at('2026-11-23T20:00:00.000Z')
    const p = await payable(t, 'pp-tokens')
    const token = p.path.slice('/pay/'.length)
    const paths = [
      `/pay/${WELL_FORMED_UNKNOWN}`,
      `/pay/${token.slice(0, 42)}`,
      `/pay/${token}A`,
      `/pay/${token.slice(0, 42)}=`,
      `/pay/${token.slice(0, 42)}.`,
      `/pay/${token.slice(0, 42)}%2B`,
      `/pay/${token.toLowerCase() === token ? token.toUpperCase() : token.toLowerCase()}`,
      `/pay/${token}/`,
      `/pay/${token}/x`,
      `/pay/${'x'.repeat(300)}`,
      '/pay/',
      '/pay',
      '/pay/assets',
      '/pay/assets/other.css',
      `/pay/${p.requestId}`,
      // Refused by the router itself, before any route runs: still the page, never problem+json.
      `/pay/${'x'.repeat(600)}`,
      '/pay/%E0%A4%A',
    ]
    for (const path of paths) {
      const res = await t.call('GET', path)
      assertMessagePage(res, 404, 'Payment request not found')
      assert.equal(title(res.body), 'Payment request not found', path)
      assert.equal(visibleText(res.body), NOT_FOUND_TEXT, path)
      const head = await t.call('HEAD', path)
      assert.equal(head.status, 404, path)
      assertPageHeaders(head)
    }
    for (const path of [`/pay/${WELL_FORMED_UNKNOWN}`, `/pay/${token.slice(0, 42)}`, `/pay/${'x'.repeat(300)}`]) {
      // A malformed token is not found before its body is even read: whatever the media type.
      for (const contentType of [FORM, 'application/json']) {
        const res = await submit(t, path, 'outcome=confirmed', contentType)
        if (path.endsWith(WELL_FORMED_UNKNOWN) && contentType !== FORM) {
          assertMessagePage(res, 415, 'The form was not sent as expected')
          continue
        }
        assertMessagePage(res, 404, 'Payment request not found')
        assert.equal(visibleText(res.body), NOT_FOUND_TEXT, path)
      }
    }
    assert.equal((await readRequest(t, p)).json.status, 'open')
  })
})

describe('the stylesheet', () => {
  test('GET /pay/assets/page.css serves the stylesheet as text/css, cacheable', async () => {
    const res = await t.call('GET', '/pay/assets/page.css')
    assert.equal(res.status, 200)
    assert.equal(res.headers['content-type'], 'text/css; charset=utf-8')
    assert.equal(res.headers['cache-control'], 'public, max-age=3600')
    assert.equal(res.headers['x-content-type-options'], 'nosniff')
    assert.equal(res.body, PAGE_STYLE)
    assert.ok(PAGE_STYLE.includes('button.pay {'))
  })
})

describe('production', () => {
  test('a payable request says no payment provider is configured, with no form; a submission is refused with 409', async () => {
    at('2026-11-23T21:00:00.000Z')
    // Production makes no request for a client without a provider (409 payment_provider_not_configured): this one was
    // made while one was configured, and the provider was removed since.
    await prod.tenant('pp-prod')
    const provider = {
      provider: 'stripe',
      secretKey: 'sk_live_ppprod0123456789abcdefgh',
      webhookSecret: 'whsec_ppprod0123456789',
    }
    assert.equal((await prod.admin('PUT', '/admin/v1/clients/pp-prod/payment-provider', provider)).status, 201)
    const p = await payable(prod, 'pp-prod')
    assert.equal((await prod.admin('DELETE', '/admin/v1/clients/pp-prod/payment-provider')).status, 204)
    const res = await prod.call('GET', p.path)
    assertMessagePage(res, 200, 'Payment request')
    assert.equal(
      visibleText(res.body),
      `Payment requested by ${CREDITOR} Payment request Amount $30.00 Description February instalment ` +
        'Pay by 30 November 2026 at 12:00 UTC ' +
        `Online payment is not available yet: no payment provider is configured. Nothing has been charged. To pay, contact ${CREDITOR}.`,
    )
    assert.equal(count(res.body, '<button'), 0)
    assert.equal(res.body.includes('Sandbox'), false)
    assertNothingPrivate(res.body, p)

    for (const outcome of ['confirmed', 'failed']) {
      const refused = await submit(prod, p.path, `outcome=${outcome}`)
      assertMessagePage(refused, 409, 'Payment request')
      assert.ok(
        visibleText(refused.body).startsWith(
          `Payment requested by ${CREDITOR} Payment request Your payment was not made: no payment provider is configured. Amount $30.00`,
        ),
        refused.body,
      )
    }
    // An unknown token is still not found.
    assertMessagePage(await submit(prod, `/pay/${WELL_FORMED_UNKNOWN}`, 'outcome=confirmed'), 404, 'Payment request not found')
    const request = (await readRequest(prod, p)).json
    assert.equal(request.status, 'open')
    assert.equal(request.payment, null)
    assert.deepEqual(await readPosition(prod, p), UNTOUCHED)
  })
})

describe('an unexpected failure', () => {
  test('is a 503 page with the request id, never a stack or problem+json', async () => {
    const app = Fastify({ logger: false, genReqId: () => 'req-1' })
    const failure = new Error('connection lost: password=hunter2 at db.internal')
    registerPaymentPage(app, {
      pageView: async () => {
        throw failure
      },
      settleFromPage: async () => {
        throw failure
      },
      pay: async () => {
        throw failure
      },
    })
    try {
      for (const [method, what] of [
        ['GET', 'Try again in a moment.'],
        ['POST', 'Your payment may not have been recorded. Open the payment page again in a moment to see where it stands.'],
      ] as const) {
        const r = await app.inject({
          method,
          url: `/pay/${WELL_FORMED_UNKNOWN}`,
          ...(method === 'POST' ? { payload: 'outcome=confirmed', headers: { 'content-type': FORM } } : {}),
        })
        const res = { status: r.statusCode, headers: r.headers, body: r.body, json: undefined }
        assert.equal(res.status, 503)
        for (const [name, value] of Object.entries(PAGE_HEADERS)) assert.equal(res.headers[name], value, name)
        assert.equal(res.headers['content-type'], 'text/html; charset=utf-8')
        assert.equal(h1(res.body), 'This page is not available right now')
        assert.equal(visibleText(res.body), `This page is not available right now ${what} Reference: req-1. Back to the payment page`)
        for (const leak of ['hunter2', 'db.internal', 'Error', 'at ']) assert.equal(res.body.includes(leak), false, leak)
      }
    } finally {
      await app.close()
    }
  })
})

describe('formatting', () => {
  test("amounts: in the client's locale (en-US by default), the request's currency, every digit the amount has", () => {
    assert.equal(formatAmount(usd('30.00')), '$30.00')
    assert.equal(formatAmount(usd('0.01')), '$0.01')
    assert.equal(formatAmount(usd('999.99')), '$999.99')
    assert.equal(formatAmount(usd('1000.00')), '$1,000.00')
    // Exact beyond a double's precision: the decimal string is formatted as it is.
    assert.equal(formatAmount(usd('90071992547409.93')), '$90,071,992,547,409.93')
    assert.equal(formatAmount({ amount: '1234567.50', currency: 'EUR' }), '€1,234,567.50')
    assert.equal(formatAmount({ amount: '5000', currency: 'JPY' }), '¥5,000')
    // Locales separate with no-break spaces, narrow or not depending on the ICU version: read here as spaces.
    const spaced = (text: string) => text.replace(/[\u00a0\u202f]/g, ' ')
    assert.equal(spaced(formatAmount({ amount: '1.234', currency: 'KWD' })), 'KWD 1.234')
    assert.equal(formatAmount({ amount: '120.00', currency: 'CAD' }), 'CA$120.00')
    assert.equal(formatAmount({ amount: '120.00', currency: 'CAD' }, 'en-CA'), '$120.00')
    assert.equal(spaced(formatAmount({ amount: '1234.50', currency: 'USD' }, 'fr-CA')), '1 234,50 $ US')
    assert.equal(spaced(formatAmount({ amount: '1234.50', currency: 'EUR' }, 'de-DE')), '1.234,50 €')
    assert.equal(formatAmount({ amount: '1234.50', currency: 'GBP' }, 'en-GB'), '£1,234.50')
  })

  test('times: in words, in UTC, to the minute', () => {
    assert.equal(formatTime('2026-11-30T12:00:00.000Z'), '30 November 2026 at 12:00 UTC')
    assert.equal(formatTime('2026-01-01T00:05:59Z'), '1 January 2026 at 00:05 UTC')
    assert.equal(formatTime('2027-02-28T23:59:59.999Z'), '28 February 2027 at 23:59 UTC')
  })
})
