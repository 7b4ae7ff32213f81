import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { replaceUnsafeDisplayCharacters } from '../../domain/display-text.ts'
import { isProblem } from '../../domain/problems.ts'
import type { AddressLimiter } from '../../http/limits.ts'
import { FAVICON, FAVICON_PATH } from './favicon.ts'
import { contactLines, DEFAULT_PAGE_LOCALE, formatAmount } from './page-format.ts'
import type { HostedPageView } from './page-service.ts'
import { accentStyle, PAGE_STYLE } from './page-style.ts'
import type { PaymentRequestService } from './service.ts'

/**
 * The hosted payment page at `hostedUrl` (`/pay/<token>`): what a debtor opens to pay a Payment request.
 *
 * Outside the v1 contract and its route objects, like /docs: server-rendered HTML with no script at all, one
 * stylesheet from the service itself, and headers that suit a payment page (docs/decisions.md, "Hosted
 * page"). Every answer under /pay, refusals and errors included, is an HTML page, never problem+json: the
 * reader is a person with a browser. The page shows only what the request asks (creditor, description,
 * amount, expiry), the creditor's branding (its display name, accent colour, support contact, and the locale
 * amounts are written in) and, once paid, the provider's payment id as the confirmation number: no Customer
 * detail or balance, and no other identifier beyond the token in its URL.
 */

export type { HostedPageView }
export { formatAmount }

/** What the page needs of the Payment request service, and nothing more. */
export type HostedPageService = Pick<PaymentRequestService, 'pageView' | 'settleFromPage' | 'pay'>

/** A page token is 256 random bits in base64url without padding: exactly 43 characters. */
export const PAGE_TOKEN = /^[A-Za-z0-9_-]{43}$/

export const PAGE_STYLESHEET_PATH = '/pay/assets/page.css'

/** A client's accent colour as a stylesheet (page-style.ts, accentStyle): by colour, so it names no client. */
export const accentStylesheetPath = (hex: string) => `/pay/assets/accent/${hex.slice(1)}.css`

/** The headers of every page answer under /pay (docs/decisions.md, "Hosted page"). */
export const PAGE_HEADERS: Readonly<Record<string, string>> = {
  'content-security-policy':
    "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-store',
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
}

/** How long a request over the page's rate limit waits for its 429 (see registerPaymentPage). */
export const REFUSAL_DELAY_MS = 1000

/** The form holds one short field; anything larger is not the page's form. */
export const FORM_BODY_LIMIT_BYTES = 1024

const HTML = 'text/html; charset=utf-8'

// ---------------------------------------------------------------------------------------------------------
// Rendering: pure functions from what the page shows to HTML. Every interpolated value is escaped.

/**
 * Escaped for HTML; a character no debtor may be shown (bidirectional and control characters, refused on input
 * since issue 20: src/domain/display-text.ts) becomes U+FFFD, for text stored before that refusal.
 */
const escapeHtml = (s: string) => replaceUnsafeDisplayCharacters(s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`))

const MONTHS = ['January', 'February', 'March', 'April', 'May', 'June', 'July', 'August', 'September', 'October', 'November', 'December']

/**
 * "30 November 2026 at 14:05 UTC": a time in words a person reads, the same in every browser and locale
 * (the page is rendered on the server, which knows nothing of the reader's time zone, so it says UTC).
 */
export function formatTime(iso: string): string {
  const d = new Date(iso)
  const hh = String(d.getUTCHours()).padStart(2, '0')
  const mm = String(d.getUTCMinutes()).padStart(2, '0')
  return `${d.getUTCDate()} ${MONTHS[d.getUTCMonth()]} ${d.getUTCFullYear()} at ${hh}:${mm} UTC`
}

function htmlDocument(title: string, main: string, accentColor: string | null = null): string {
  const accent = accentColor === null ? '' : `\n<link rel="stylesheet" href="${escapeHtml(accentStylesheetPath(accentColor))}">`
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex, nofollow">
<title>${escapeHtml(title)}</title>
<link rel="icon" href="${FAVICON_PATH}">
<link rel="stylesheet" href="${PAGE_STYLESHEET_PATH}">${accent}
</head>
<body>
<main>
${main}
</main>
</body>
</html>
`
}

type NoticeKind = 'sandbox' | 'error' | 'success' | 'info'

/** A notice of already-escaped HTML. */
const notice = (kind: NoticeKind, html: string) => `<div class="notice notice-${kind}"><p>${html}</p></div>`

/** The request's details as a definition list: [label, escaped value, class of the value]. */
function summary(rows: [string, string, string?][]): string {
  const items = rows.map(([label, value, cls]) => `<div><dt>${label}</dt><dd${cls ? ` class="${cls}"` : ''}>${value}</dd></div>`)
  return `<dl class="summary">\n${items.join('\n')}\n</dl>`
}

/** What the page says, per state: its title (also the h1), and its body after the h1. */
function stateContent(token: string, view: HostedPageView): { heading: string; body: string } {
  const amount = escapeHtml(formatAmount(view.amount, view.branding.locale ?? DEFAULT_PAGE_LOCALE))
  const creditor = escapeHtml(creditorOf(view))
  const amountRow: [string, string, string] = ['Amount', amount, 'amount']
  const descriptionRows: [string, string][] = view.description === null ? [] : [['Description', escapeHtml(view.description)]]
  const decided = view.decidedAt === null ? null : escapeHtml(formatTime(view.decidedAt))
  const expires = escapeHtml(formatTime(view.expiresAt))

  switch (view.state) {
    case 'payable': {
      const details = summary([amountRow, ...descriptionRows, ['Pay by', expires]])
      if (view.providerCheckout) return providerCheckoutContent(token, view.providerCheckout, amount, creditor, details)
      if (!view.sandboxForm) {
        return {
          heading: 'Payment request',
          body: `${details}
${notice('info', `Online payment is not available yet: no payment provider is configured. Nothing has been charged. To pay, contact ${creditor}.`)}`,
        }
      }
      return {
        heading: 'Payment request',
        body: `${details}
${notice('sandbox', '<strong>Sandbox.</strong> This is a test payment page and no money moves: the buttons below only simulate what a payment provider would report.')}
<form method="post" action="/pay/${escapeHtml(token)}">
<button type="submit" name="outcome" value="confirmed" class="pay">Pay ${amount}</button>
<button type="submit" name="outcome" value="failed" class="fail">Simulate a failed payment</button>
</form>`,
      }
    }
    case 'confirmed':
      if (view.refundedInFull) {
        return {
          heading: 'Payment refunded',
          body: `${notice('info', `Your payment of ${amount} to ${creditor} was refunded in full. Contact ${creditor} if you have questions.`)}
${summary([amountRow, ...descriptionRows, ...(decided ? [['Paid on', decided] as [string, string]] : [])])}`,
        }
      }
      return {
        heading: 'Payment received',
        body: `${notice('success', `Thank you. Your payment of ${amount} to ${creditor} was received${decided ? ` on ${decided}` : ''}.`)}
${summary([
  amountRow,
  ...descriptionRows,
  ...(decided ? [['Paid on', decided] as [string, string]] : []),
  ...(view.confirmationNumber
    ? [['Confirmation number', escapeHtml(view.confirmationNumber), 'confirmation'] as [string, string, string]]
    : []),
])}
<p class="fine-print">You can close this page.</p>`,
      }
    case 'failed':
      return {
        heading: 'Payment failed',
        body: `${notice('error', `The payment did not go through, and nothing was charged. This payment request cannot be used again: ask ${creditor} for a new payment request.`)}
${summary([amountRow, ...descriptionRows, ...(decided ? [['Failed on', decided] as [string, string]] : [])])}`,
      }
    case 'expired':
      return {
        heading: 'This payment request has expired',
        body: `${notice('info', `It can no longer be paid, and nothing has been charged. Ask ${creditor} for a new payment request.`)}
${summary([amountRow, ...descriptionRows, ['Expired on', expires]])}`,
      }
    case 'canceled':
      // No form: a canceled request is final. Why it was canceled is the debtor's business only when the balance
      // changed under them (they came to pay); the integrator's note is never shown.
      return view.cancelReason === 'balance_changed'
        ? {
            heading: 'The balance has changed',
            body: `${notice('info', `The amount owed changed since this payment request was made, so it was canceled and nothing has been charged. Ask ${creditor} for a new payment request.`)}
${summary([amountRow, ...descriptionRows])}`,
          }
        : {
            heading: 'This payment request was canceled',
            body: `${notice('info', `${creditor} canceled it: it can no longer be paid, and nothing has been charged. Contact ${creditor} if you have questions.`)}
${summary([amountRow, ...descriptionRows])}`,
          }
    case 'held':
      return {
        heading: 'This payment request is on hold',
        body: `${notice('info', `It cannot be paid now, and nothing has been charged. Contact ${creditor} if you have questions.`)}
${summary([amountRow, ...descriptionRows])}`,
      }
  }
}

/**
 * A payable request of a client with a real provider (payments/checkout.ts): one Pay button that takes the
 * debtor to the provider's page; or, while a payment is under way, "processing" (the page reloads itself every
 * PROCESSING_REFRESH_SECONDS through the Refresh header, with no script); or, close to its expiry, no button.
 */
function providerCheckoutContent(
  token: string,
  offer: NonNullable<HostedPageView['providerCheckout']>,
  amount: string,
  creditor: string,
  details: string,
): { heading: string; body: string } {
  if (offer === 'processing') {
    return {
      heading: 'Payment processing',
      body: `${notice('info', 'Your payment is being processed. This page updates by itself: it will say when the payment is received. You do not need to pay again.')}
${details}`,
    }
  }
  if (offer === 'too_late') {
    return {
      heading: 'Payment request',
      body: `${details}
${notice('info', `This payment request expires too soon to pay online, and nothing has been charged. Ask ${creditor} for a new payment request.`)}`,
    }
  }
  const failed =
    offer === 'pay_again' ? `${notice('error', 'Your bank payment did not go through, and nothing was charged. You can pay again.')}\n` : ''
  return {
    heading: 'Payment request',
    body: `${failed}${details}
<form method="post" action="/pay/${escapeHtml(token)}">
<button type="submit" name="action" value="pay" class="pay">Pay ${amount}</button>
</form>
<p class="fine-print">You will pay on our payment provider's secure page, then come back here.</p>`,
  }
}

/** How often the "processing" page reloads itself (the Refresh header). */
export const PROCESSING_REFRESH_SECONDS = 3

/**
 * The page of one Payment request. `refusal` is a message for a form submission the service refused (the
 * page then shows the request's current state below it).
 */
export function renderPaymentPage(token: string, view: HostedPageView, refusal?: string): string {
  const { heading, body } = stateContent(token, view)
  const creditor = escapeHtml(creditorOf(view))
  return htmlDocument(
    `${heading} · ${creditorOf(view)}`,
    `<p class="creditor">Payment requested by <strong>${creditor}</strong></p>
<h1>${escapeHtml(heading)}</h1>
${refusal === undefined ? '' : `${notice('error', escapeHtml(refusal))}\n`}${body}${contactSection(view)}`,
    view.branding.accentColor,
  )
}

/** The name the debtor reads: the branding's display name, else the client's name (else its code). */
const creditorOf = (view: HostedPageView) => view.branding.displayName ?? view.creditorName

/**
 * How to reach the creditor, on every state of the page (after a failure, "ask for a new payment request" needs
 * an address): the branding's email, phone and web page; nothing when it gives none.
 */
function contactSection(view: HostedPageView): string {
  const lines = contactLines(view.branding)
  if (lines.length === 0) return ''
  const items = lines.map((l) => `<li><span class="label">${l.label}</span> <a href="${escapeHtml(l.href)}">${escapeHtml(l.text)}</a></li>`)
  return `
<section class="contact" aria-labelledby="contact-heading">
<h2 id="contact-heading">Questions about this payment?</h2>
<p>Contact ${escapeHtml(creditorOf(view))}:</p>
<ul>
${items.join('\n')}
</ul>
</section>`
}

/** A page with no Payment request to show: not found, a malformed submission, an error. */
export function renderMessagePage(heading: string, message: string, back?: { href: string; text: string }): string {
  const link = back ? `\n<p><a href="${escapeHtml(back.href)}">${escapeHtml(back.text)}</a></p>` : ''
  return htmlDocument(heading, `<h1>${escapeHtml(heading)}</h1>\n<p>${escapeHtml(message)}</p>${link}`)
}

/** Over PAY_RATE_LIMIT_PER_MINUTE from one address: a page for a person, sent with Retry-After. */
export const tooManyRequestsPage = (method: string, retryAfterSeconds: number) =>
  renderMessagePage(
    'Too many requests',
    `${method === 'POST' ? 'Your payment was not made: this' : 'This'} page was opened too often from your network in the last minute. Wait ${retryAfterSeconds === 1 ? '1 second' : `${retryAfterSeconds} seconds`}, then open the link again. Nothing has been charged.`,
  )

export const NOT_FOUND_PAGE = renderMessagePage(
  'Payment request not found',
  'There is no payment request at this address. Check that the link is complete, exactly as you received it.',
)

/**
 * What a refused form submission tells the reader, by the service's problem code: held, already settled or
 * expired, or (`route_not_found`) a deployment whose provider offers no form, as production today.
 */
const REFUSALS = {
  recovery_held: 'Your payment was not made: this payment request is on hold.',
  payment_request_state_conflict: 'Your payment was not made: this payment request was already settled, canceled or has expired.',
  route_not_found: 'Your payment was not made: no payment provider is configured.',
} as const

const isRefusal = (code: string): code is keyof typeof REFUSALS => Object.hasOwn(REFUSALS, code)

// ---------------------------------------------------------------------------------------------------------
// Routes.

function sendPage(
  reply: FastifyReply,
  status: number,
  html: string,
  headers: Readonly<Record<string, string>> = PAGE_HEADERS,
): FastifyReply {
  return reply.code(status).headers(headers).type(HTML).send(html)
}

/**
 * The headers of a page whose form sends the debtor on to a provider's checkout (a 303 to another origin): browsers
 * apply `form-action` to a form's redirects too, so the provider's checkout origins are allowed there, and only there.
 */
export function checkoutPageHeaders(checkoutOrigins: readonly string[]): Readonly<Record<string, string>> {
  const csp = PAGE_HEADERS['content-security-policy'] as string
  return {
    ...PAGE_HEADERS,
    'content-security-policy': csp.replace("form-action 'self'", `form-action 'self' ${checkoutOrigins.join(' ')}`),
  }
}

const tokenOf = (request: FastifyRequest) => (request.params as { token?: string }).token ?? ''

/** A way back to the page, for a page answering a submission; only for a well-formed token. */
const backTo = (token: string) => (PAGE_TOKEN.test(token) ? { href: `/pay/${token}`, text: 'Back to the payment page' } : undefined)

/**
 * What the form asks: `pay` (the Pay button of a client with a real provider, `action=pay`), or the sandbox form's
 * outcome (`outcome=confirmed|failed`); one field, once, else undefined (not the page's form).
 */
function submissionOf(body: unknown): 'pay' | 'confirmed' | 'failed' | undefined {
  const form = body instanceof URLSearchParams ? body : new URLSearchParams()
  const actions = form.getAll('action')
  const outcomes = form.getAll('outcome')
  if (actions.length === 1 && outcomes.length === 0) return actions[0] === 'pay' ? 'pay' : undefined
  const outcome = actions.length === 0 && outcomes.length === 1 ? outcomes[0] : undefined
  return outcome === 'confirmed' || outcome === 'failed' ? outcome : undefined
}

/** A submission that is not the page's form (wrong media type, outcome or size). */
const badForm = (back: ReturnType<typeof backTo>, heading = 'The form was not sent as expected') =>
  renderMessagePage(heading, 'Use the buttons of the payment page.', back)

/**
 * Registers `GET /pay/:token`, `POST /pay/:token` (the Pay button, `action=pay`: a checkout at the client's provider;
 * or the sandbox form, `outcome=confirmed|failed`: two separate operations), `GET /pay/assets/page.css` and
 * `GET /pay/assets/accent/<rrggbb>.css`, in an encapsulated scope with its own body parser, error and not-found
 * handlers, so nothing under /pay answers problem+json and the API's JSON parsers never see the form; and
 * `GET /favicon.ico`, outside it.
 */
export function registerPaymentPage(
  app: FastifyInstance,
  service: HostedPageService,
  opts: { limiter?: AddressLimiter; checkoutOrigins?: readonly string[] } = {},
): void {
  const { limiter } = opts
  const checkoutHeaders = checkoutPageHeaders(opts.checkoutOrigins ?? [])
  app.register(
    async (scope) => {
      // First of all: over the address's budget (PAY_RATE_LIMIT_PER_MINUTE, GET and POST together) a request is
      // answered from memory, before its token is looked at or its body read, so a flood never reaches the store.
      // The stylesheet is not counted: it holds nothing and every page load fetches it.
      if (limiter) {
        scope.addHook('onRequest', async (request, reply) => {
          if (request.routeOptions.url?.startsWith('/pay/assets/')) return
          const rate = limiter.hit(request.ip, request.socket.remoteAddress)
          if (rate.allowed) return
          // Answered after a pause: a client flooding over N connections then sends at most N requests a
          // REFUSAL_DELAY_MS, instead of as many as this process can refuse, which would keep its event loop
          // (and so every other tenant's requests) waiting behind the refusals. Measured (bench/page-flood.ts):
          // refused at once, 50 connections still raised another tenant's p50 5 to 11 times.
          await new Promise((resolve) => setTimeout(resolve, REFUSAL_DELAY_MS))
          reply.header('retry-after', String(rate.resetSeconds))
          return sendPage(reply, 429, tooManyRequestsPage(request.method, rate.resetSeconds))
        })
      }

      // Only the form's media type, parsed as plain URL-encoded pairs and kept small; any other media type
      // is a 415 page (Fastify's FST_ERR_CTP_INVALID_MEDIA_TYPE, answered by the error handler below).
      scope.removeAllContentTypeParsers()
      scope.addContentTypeParser(
        'application/x-www-form-urlencoded',
        { parseAs: 'string', bodyLimit: FORM_BODY_LIMIT_BYTES },
        (_request, body, done) => done(null, new URLSearchParams(body as string)),
      )

      scope.setErrorHandler((err, request, reply) => {
        const e = err as { name?: string; code?: string; statusCode?: number; message?: string; stack?: string }
        const back = backTo(tokenOf(request))
        if (e.code === 'FST_ERR_CTP_BODY_TOO_LARGE') {
          return sendPage(reply, 413, badForm(back, 'The form was too large'))
        }
        if (e.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE' || e.code === 'FST_ERR_CTP_INVALID_TYPE') {
          return sendPage(reply, 415, badForm(back))
        }
        if (typeof e.statusCode === 'number' && e.statusCode >= 400 && e.statusCode < 500) {
          return sendPage(reply, 400, badForm(back))
        }
        // Never the error's detail or parameters: they can hold customer data. Nor the token, should a message
        // quote it: it opens the page (the request line itself is logged as /pay/[redacted], src/http/server.ts).
        const token = tokenOf(request)
        const scrub = (text?: string) => (text && token ? text.split(token).join('[redacted]') : text)
        request.log.error({ errName: e.name, errCode: e.code, errMessage: scrub(e.message), stack: scrub(e.stack) }, 'payment page error')
        const what =
          request.method === 'POST'
            ? 'Your payment may not have been recorded. Open the payment page again in a moment to see where it stands.'
            : 'Try again in a moment.'
        return sendPage(reply, 503, renderMessagePage('This page is not available right now', `${what} Reference: ${request.id}.`, back))
      })

      scope.setNotFoundHandler((request, reply) => {
        const path = request.url.split('?')[0] ?? ''
        if (/^\/pay\/[^/]+$/.test(path)) {
          reply.header('allow', 'GET, HEAD, POST')
          return sendPage(
            reply,
            405,
            renderMessagePage('Not available', 'This address only shows a payment page.', backTo(tokenOf(request))),
          )
        }
        return sendPage(reply, 404, NOT_FOUND_PAGE)
      })

      // The stylesheet is the same for every page and holds nothing private: browsers may keep it.
      scope.get('/assets/page.css', async (_request, reply) =>
        reply
          .header('cache-control', 'public, max-age=3600')
          .header('x-content-type-options', 'nosniff')
          .type('text/css; charset=utf-8')
          .send(PAGE_STYLE),
      )

      // A client's accent colour: the same for every colour's pages, and names no client.
      scope.get('/assets/accent/:file', async (request, reply) => {
        const hex = /^([0-9a-f]{6})\.css$/.exec((request.params as { file?: string }).file ?? '')?.[1]
        if (!hex) return sendPage(reply, 404, NOT_FOUND_PAGE)
        return reply
          .header('cache-control', 'public, max-age=86400')
          .header('x-content-type-options', 'nosniff')
          .type('text/css; charset=utf-8')
          .send(accentStyle(`#${hex}`))
      })

      scope.get('/:token', async (request, reply) => {
        const token = tokenOf(request)
        // The token's shape is checked before any lookup: nothing else reaches the store.
        if (!PAGE_TOKEN.test(token)) return sendPage(reply, 404, NOT_FOUND_PAGE)
        const returnedFrom = (request.query as { checkout?: unknown }).checkout
        const view = await service.pageView(token, typeof returnedFrom === 'string' ? { returnedFrom } : {})
        if (!view) return sendPage(reply, 404, NOT_FOUND_PAGE)
        if (view.providerCheckout === 'processing') reply.header('refresh', String(PROCESSING_REFRESH_SECONDS))
        const offersPay = view.providerCheckout === 'pay' || view.providerCheckout === 'pay_again'
        return sendPage(reply, 200, renderPaymentPage(token, view), offersPay ? checkoutHeaders : PAGE_HEADERS)
      })

      scope.post(
        '/:token',
        {
          // Before the body is read: a malformed token is not found whatever the body, and a compressed body
          // is not the form.
          onRequest: async (request, reply) => {
            if (!PAGE_TOKEN.test(tokenOf(request))) return sendPage(reply, 404, NOT_FOUND_PAGE)
            const encoding = request.headers['content-encoding']
            if (encoding !== undefined && encoding.toLowerCase() !== 'identity') {
              return sendPage(reply, 415, badForm(backTo(tokenOf(request))))
            }
          },
        },
        async (request, reply) => {
          const token = tokenOf(request)
          const submitted = submissionOf(request.body)
          if (!submitted) return sendPage(reply, 400, badForm(backTo(token)))
          let answer: Awaited<ReturnType<HostedPageService['settleFromPage']>>
          try {
            answer = submitted === 'pay' ? await service.pay(token) : await service.settleFromPage(token, submitted)
          } catch (err) {
            if (!isProblem(err)) throw err
            if (err.code === 'payment_request_not_found') return sendPage(reply, 404, NOT_FOUND_PAGE)
            if (!isRefusal(err.code)) throw err
            // The page as it stands now, under the refusal (production refuses before looking the token up).
            const view = await service.pageView(token)
            if (!view) return sendPage(reply, 404, NOT_FOUND_PAGE)
            return sendPage(reply, 409, renderPaymentPage(token, view, REFUSALS[err.code]))
          }
          // A real provider: to its page (or back to this one), or refused with the page as it stands.
          if (answer && 'redirect' in answer) return reply.code(303).headers(PAGE_HEADERS).header('location', answer.redirect).send()
          if (answer && 'refusal' in answer) {
            const view = await service.pageView(token)
            if (!view) return sendPage(reply, 404, NOT_FOUND_PAGE)
            return sendPage(reply, 409, renderPaymentPage(token, view, answer.refusal))
          }
          // Post/redirect/get: the page shows the outcome, and reloading it submits nothing again.
          return reply.code(303).headers(PAGE_HEADERS).header('location', `/pay/${token}`).send()
        },
      )
    },
    { prefix: '/pay' },
  )

  // The icon every page links (and browsers ask for anyway): one small image, the same for everyone.
  app.get(FAVICON_PATH, async (_request, reply) =>
    reply.header('cache-control', 'public, max-age=86400').header('x-content-type-options', 'nosniff').type('image/x-icon').send(FAVICON),
  )
}
