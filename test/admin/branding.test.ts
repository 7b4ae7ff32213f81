import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import fc from 'fast-check'
import { UNSAFE_DISPLAY_CHARACTER } from '../../src/domain/display-text.ts'
import { problemCode, type Response, startTestApp, type TestApp } from '../helpers/app.ts'
import { CREDITOR, pageRequest } from '../helpers/payments.ts'

/**
 * A client's branding on the hosted payment page (issue 24 item 5; docs/operator-api.md, "Branding"): the operator
 * API validates it (422 at the field, nothing changed), and every state of the page shows the display name, the
 * support contact and amounts in the client's locale. The looks are checked in a browser by
 * test/browser/payment-page.test.ts.
 */
let now = new Date('2026-11-23T12:00:00.000Z')
const clock = { now: () => now }
const at = (iso: string) => {
  now = new Date(iso)
}

let t: TestApp
let prod: TestApp
before(async () => {
  t = await startTestApp({}, { clock })
  prod = await startTestApp({ SERVICE_ENVIRONMENT: 'production' }, { clock, db: t.db })
})
after(async () => {
  await prod?.close()
  await t?.close()
})

const must = (r: Response, status: number) => {
  assert.equal(r.status, status, r.body)
  return r
}
const pointers = (r: Response) => (r.json.errors as { code: string; pointer: string }[]).map((e) => [e.code, e.pointer])

const FULL = {
  displayName: 'Lakeside CU',
  accentColor: '#0F5132',
  supportEmail: 'help@lakeside-cu.example',
  supportPhone: '+1 (555) 010-0199',
  supportUrl: 'https://lakeside-cu.example/help?topic=payments',
  locale: 'en-CA',
}

/** WCAG 2 contrast against white, computed here independently of the service's own function. */
function contrastWithWhite(hex: string): number {
  const [r, g, b] = [1, 3, 5].map((i) => {
    const c = Number.parseInt(hex.slice(i, i + 2), 16) / 255
    return c <= 0.04045 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4
  }) as [number, number, number]
  return 1.05 / (0.2126 * r + 0.7152 * g + 0.0722 * b + 0.05)
}

describe('the operator API', () => {
  test('PUT replaces the branding as a whole, normalized; GET reads it back; audited without the contact details', async () => {
    at('2026-11-23T12:00:00.000Z')
    must(await t.admin('PUT', '/admin/v1/clients/br-a', { name: 'Lakeside Credit Union' }), 201)
    const empty = must(await t.admin('GET', '/admin/v1/clients/br-a/branding'), 200).json
    assert.deepEqual(empty, {
      clientCode: 'br-a',
      displayName: null,
      accentColor: null,
      supportEmail: null,
      supportPhone: null,
      supportUrl: null,
      locale: null,
      updatedAt: '2026-11-23T12:00:00.000Z',
    })
    at('2026-11-23T12:05:00.000Z')
    const put = must(await t.admin('PUT', '/admin/v1/clients/br-a/branding', { ...FULL, locale: 'EN-ca' }), 200).json
    const stored = { clientCode: 'br-a', ...FULL, accentColor: '#0f5132', updatedAt: '2026-11-23T12:05:00.000Z' }
    assert.deepEqual(put, stored)
    assert.deepEqual(must(await t.admin('GET', '/admin/v1/clients/br-a/branding'), 200).json, stored)
    // Replaced as a whole: what the next PUT leaves out is removed.
    at('2026-11-23T12:06:00.000Z')
    const smaller = must(await t.admin('PUT', '/admin/v1/clients/br-a/branding', { supportPhone: '555 0100' }), 200).json
    assert.deepEqual(smaller, { ...empty, supportPhone: '555 0100', updatedAt: '2026-11-23T12:06:00.000Z' })

    const events = must(await t.admin('GET', '/admin/v1/audit-events?clientCode=br-a'), 200).json.data as {
      action: string
      details: unknown
    }[]
    assert.deepEqual(
      events.filter((e) => e.action === 'client.branding_updated').map((e) => e.details),
      [
        {
          fields: ['accentColor', 'displayName', 'locale', 'supportEmail', 'supportPhone', 'supportUrl'],
          accentColor: '#0f5132',
          locale: 'en-CA',
        },
        { fields: ['supportPhone'], accentColor: null, locale: null },
      ],
    )
    const text = JSON.stringify(events)
    for (const contact of [FULL.supportEmail, FULL.supportPhone, 'lakeside-cu.example/help']) assert.ok(!text.includes(contact), contact)
  })

  test('an unknown client is 404 client_not_found on both routes', async () => {
    assert.equal(problemCode(must(await t.admin('GET', '/admin/v1/clients/br-ghost/branding'), 404)), 'client_not_found')
    assert.equal(problemCode(must(await t.admin('PUT', '/admin/v1/clients/br-ghost/branding', {}), 404)), 'client_not_found')
  })

  test('each invalid field is a 422 at its pointer, and nothing changes', async () => {
    must(await t.admin('PUT', '/admin/v1/clients/br-bad', {}), 201)
    must(await t.admin('PUT', '/admin/v1/clients/br-bad/branding', FULL), 200)
    const before = must(await t.admin('GET', '/admin/v1/clients/br-bad/branding'), 200).json
    const cases: [Record<string, unknown>, [string, string][]][] = [
      [{ accentColor: '#ffcc00' }, [['custom', '/accentColor']]],
      [{ accentColor: '#777777' }, [['custom', '/accentColor']]],
      [{ accentColor: 'red' }, [['custom', '/accentColor']]],
      [{ accentColor: '#1d4ed' }, [['custom', '/accentColor']]],
      [{ accentColor: 1 }, [['invalid_type', '/accentColor']]],
      [{ supportEmail: 'help' }, [['invalid_format', '/supportEmail']]],
      [
        { supportEmail: 'help@x.example\u202e' },
        [
          ['invalid_format', '/supportEmail'],
          ['custom', '/supportEmail'],
        ],
      ],
      [{ supportPhone: 'call us' }, [['invalid_format', '/supportPhone']]],
      [{ supportPhone: '12' }, [['custom', '/supportPhone']]],
      [{ supportPhone: '+1 555 010 0199 0199 0199' }, [['custom', '/supportPhone']]],
      [{ supportUrl: 'http://lakeside-cu.example' }, [['custom', '/supportUrl']]],
      [{ supportUrl: 'javascript:alert(1)' }, [['custom', '/supportUrl']]],
      [{ supportUrl: 'https://user:pw@lakeside-cu.example' }, [['custom', '/supportUrl']]],
      [{ supportUrl: 'https://localhost/help' }, [['custom', '/supportUrl']]],
      // Issue 33 item 7: an IP address in any spelling the URL parser reads is not a domain name.
      [{ supportUrl: 'https://127.0.0.1/' }, [['custom', '/supportUrl']]],
      [{ supportUrl: 'https://[::1]/' }, [['custom', '/supportUrl']]],
      [{ supportUrl: 'https://0x7f.1/help' }, [['custom', '/supportUrl']]],
      [{ supportUrl: 'https://2130706433/' }, [['custom', '/supportUrl']]],
      [{ supportUrl: 'https://198.51.100.7:8443/help' }, [['custom', '/supportUrl']]],
      [{ displayName: 'Lakeside\u200B CU' }, [['custom', '/displayName']]],
      [{ displayName: 'Lakeside\u200F CU' }, [['custom', '/displayName']]],
      [{ displayName: 'Lakeside\u061C CU' }, [['custom', '/displayName']]],
      [{ displayName: '\uFEFFLakeside CU' }, [['custom', '/displayName']]],
      [{ supportUrl: 'https://lakeside-cu.example/\u2028' }, [['custom', '/supportUrl']]],
      [{ locale: 'en_US' }, [['custom', '/locale']]],
      [{ locale: 'xx' }, [['custom', '/locale']]],
      [{ locale: '' }, [['custom', '/locale']]],
      [{ displayName: '' }, [['too_small', '/displayName']]],
      [{ displayName: '   ' }, [['custom', '/displayName']]],
      [{ displayName: 'Pay to \u202emoc.live' }, [['custom', '/displayName']]],
      [{ displayName: 'x'.repeat(101) }, [['too_big', '/displayName']]],
      [{ logo: 'https://x.example/logo.png' }, [['unrecognized_keys', '/logo']]],
    ]
    for (const [body, expected] of cases) {
      const r = must(await t.admin('PUT', '/admin/v1/clients/br-bad/branding', body), 422)
      assert.deepEqual(pointers(r), expected, JSON.stringify(body))
    }
    for (const url of ['https://127.0.0.1/', 'https://[::1]/']) {
      assert.deepEqual(must(await t.admin('PUT', '/admin/v1/clients/br-bad/branding', { supportUrl: url }), 422).json.errors, [
        {
          code: 'custom',
          detail: 'must name a host by its domain name, such as acme-cu.example, not an IP address',
          pointer: '/supportUrl',
        },
      ])
    }
    const refused = must(await t.admin('PUT', '/admin/v1/clients/br-bad/branding', { accentColor: '#777777' }), 422)
    assert.match(refused.json.errors[0].detail, /^has a contrast of 4\.48:1 against white; .* at least 4\.5:1 \(WCAG AA\)/)
    assert.deepEqual(must(await t.admin('GET', '/admin/v1/clients/br-bad/branding'), 200).json, before)
    // The darkest grey refused and the lightest accepted, by the WCAG figures.
    assert.equal(
      must(await t.admin('PUT', '/admin/v1/clients/br-bad/branding', { accentColor: '#767676' }), 200).json.accentColor,
      '#767676',
    )
  })

  test('accentColor: accepted exactly when its contrast against white is at least 4.5:1 (property)', async () => {
    must(await t.admin('PUT', '/admin/v1/clients/br-colour', {}), 201)
    const hex = fc.integer({ min: 0, max: 0xffffff }).map((n) => `#${n.toString(16).padStart(6, '0')}`)
    await fc.assert(
      fc.asyncProperty(hex, fc.boolean(), async (colour, upper) => {
        const sent = upper ? colour.toUpperCase() : colour
        const r = await t.admin('PUT', '/admin/v1/clients/br-colour/branding', { accentColor: sent })
        if (contrastWithWhite(colour) >= 4.5) {
          assert.equal(r.status, 200, `${sent}: ${r.body}`)
          assert.equal(r.json.accentColor, colour)
        } else {
          assert.equal(r.status, 422, `${sent}: ${r.body}`)
          assert.deepEqual(pointers(r), [['custom', '/accentColor']])
        }
      }),
      { numRuns: 60 },
    )
  })

  test('displayName and locale: display text of 1 to 100 characters; a tag Intl formats in (property)', async () => {
    must(await t.admin('PUT', '/admin/v1/clients/br-text', {}), 201)
    const unsafe = fc.constantFrom(
      '\u0000',
      '\u0009',
      '\u000a',
      '\u007f',
      '\u0085',
      '\u2028',
      '\u202a',
      '\u2069',
      '\u200b',
      '\u200f',
      '\u061c',
      '\ufeff',
    )
    const name = fc.oneof(
      fc.string({ maxLength: 120 }),
      fc.tuple(fc.string({ maxLength: 10 }), unsafe, fc.string({ maxLength: 10 })).map(([a, u, b]) => a + u + b),
    )
    await fc.assert(
      fc.asyncProperty(name, async (n) => {
        const r = await t.admin('PUT', '/admin/v1/clients/br-text/branding', { displayName: n })
        const valid = n.length >= 1 && n.length <= 100 && !UNSAFE_DISPLAY_CHARACTER.test(n) && n.trim().length > 0
        assert.equal(r.status, valid ? 200 : 422, `${JSON.stringify(n)}: ${r.body}`)
        if (valid) assert.equal(r.json.displayName, n)
        else
          assert.ok(
            pointers(r).every(([, p]) => p === '/displayName'),
            r.body,
          )
      }),
      { numRuns: 50 },
    )
    const tag = fc.oneof(
      fc.constantFrom('en-US', 'fr-CA', 'de', 'es-MX', 'ja-JP', 'en-GB', 'pt-BR', 'zh-Hant-TW', 'ar-EG'),
      fc.string({ maxLength: 12 }),
    )
    await fc.assert(
      fc.asyncProperty(tag, async (locale) => {
        let canonical: string | undefined
        try {
          canonical = Intl.getCanonicalLocales(locale)[0]
        } catch {
          canonical = undefined
        }
        const supported =
          canonical !== undefined && Intl.NumberFormat.supportedLocalesOf([canonical], { localeMatcher: 'lookup' }).length === 1
        const r = await t.admin('PUT', '/admin/v1/clients/br-text/branding', { locale })
        assert.equal(r.status, supported ? 200 : 422, `${JSON.stringify(locale)}: ${r.body}`)
        if (supported) assert.equal(r.json.locale, canonical)
        else assert.deepEqual(pointers(r), [['custom', '/locale']])
      }),
      { numRuns: 50 },
    )
  })
})

/** The page's text as a reader gets it: tags dropped, entities decoded, white space collapsed. */
function visibleText(html: string): string {
  return html
    .slice(html.indexOf('<body>'))
    .replace(/<[^>]+>/g, ' ')
    .replace(/&#(\d+);/g, (_, n: string) => String.fromCharCode(Number(n)))
    .replace(/\s+/g, ' ')
    .trim()
}

const CONTACT =
  'Questions about this payment? Contact Lakeside CU: Email help@lakeside-cu.example Phone +1 (555) 010-0199 Web lakeside-cu.example/help?topic=payments'

/** The contact section's links, exactly. */
function assertContact(html: string) {
  assert.ok(visibleText(html).endsWith(CONTACT), visibleText(html))
  assert.ok(html.includes('<a href="mailto:help@lakeside-cu.example">help@lakeside-cu.example</a>'))
  assert.ok(html.includes('<a href="tel:+15550100199">+1 (555) 010-0199</a>'))
  assert.ok(html.includes('<a href="https://lakeside-cu.example/help?topic=payments">lakeside-cu.example/help?topic=payments</a>'))
  assert.ok(html.includes('<link rel="stylesheet" href="/pay/assets/accent/0f5132.css">'))
  assert.ok(html.includes('<link rel="icon" href="/favicon.ico">'))
}

describe('the page with branding', () => {
  test('every state shows the display name, the support contact, and amounts in the client locale', async () => {
    at('2026-11-23T13:00:00.000Z')
    const brand = async (client: string) => must(await t.admin('PUT', `/admin/v1/clients/${client}/branding`, FULL), 200)
    // A request in USD for a client in en-CA: the currency is the request's, its writing the locale's.
    const payable = await pageRequest(t, 'br-open')
    await brand(payable.client)
    const page = await t.call('GET', payable.hostedUrl.pathname)
    assert.equal(page.status, 200)
    assert.match(visibleText(page.body), /^Payment requested by Lakeside CU Payment request Amount US\$30\.00 /)
    assert.ok(visibleText(page.body).includes('Pay US$30.00 Simulate a failed payment'))
    assert.ok(/<title>Payment request · Lakeside CU<\/title>/.test(page.body))
    assertContact(page.body)
    assert.ok(!page.body.includes(CREDITOR))

    const states: [string, () => Promise<Response>][] = []
    const confirmed = await pageRequest(t, 'br-paid')
    await brand(confirmed.client)
    must(
      await t.call('POST', confirmed.hostedUrl.pathname, {
        rawBody: 'outcome=confirmed',
        contentType: 'application/x-www-form-urlencoded',
      }),
      303,
    )
    states.push(['Payment received', () => t.call('GET', confirmed.hostedUrl.pathname)])
    const failed = await pageRequest(t, 'br-failed')
    await brand(failed.client)
    must(
      await t.call('POST', failed.hostedUrl.pathname, { rawBody: 'outcome=failed', contentType: 'application/x-www-form-urlencoded' }),
      303,
    )
    states.push(['Payment failed', () => t.call('GET', failed.hostedUrl.pathname)])
    const expired = await pageRequest(t, 'br-expired', { expiresAt: '2026-11-23T13:10:00Z' })
    await brand(expired.client)
    const canceled = await pageRequest(t, 'br-canceled')
    await brand(canceled.client)
    must(
      await t.call('POST', `/v1/clients/${canceled.client}/payment-requests/${canceled.requestId}/cancel`, {
        key: canceled.tenant.apiKey,
        body: {},
      }),
      200,
    )
    states.push(['This payment request was canceled', () => t.call('GET', canceled.hostedUrl.pathname)])
    states.push(['This payment request has expired', () => t.call('GET', expired.hostedUrl.pathname)])
    const production = await pageRequest(prod, 'br-prod')
    await brand(production.client)
    states.push(['Payment request', () => prod.call('GET', production.hostedUrl.pathname)])
    states.push([
      'Payment request',
      () =>
        prod.call('POST', production.hostedUrl.pathname, {
          rawBody: 'outcome=confirmed',
          contentType: 'application/x-www-form-urlencoded',
        }),
    ])

    at('2026-11-23T13:20:00.000Z')
    for (const [heading, get] of states) {
      const res = await get()
      assert.ok(res.status === 200 || res.status === 409, `${heading}: ${res.status}`)
      assert.equal(/<h1>([^<]*)<\/h1>/.exec(res.body)?.[1], heading)
      assertContact(res.body)
    }
    const paid = await t.call('GET', confirmed.hostedUrl.pathname)
    const { providerPaymentId } = (
      await t.call('GET', `/v1/clients/${confirmed.client}/payment-requests/${confirmed.requestId}`, { key: confirmed.tenant.apiKey })
    ).json.payment
    assert.ok(visibleText(paid.body).includes(`Thank you. Your payment of US$30.00 to Lakeside CU was received`))
    assert.ok(visibleText(paid.body).includes(`Confirmation number ${providerPaymentId}`))
  })

  test('without branding: the client name, no contact section, no accent stylesheet, en-US amounts', async () => {
    at('2026-11-23T14:00:00.000Z')
    const p = await pageRequest(t, 'br-plain')
    const page = await t.call('GET', p.hostedUrl.pathname)
    assert.match(visibleText(page.body), /^Payment requested by Lakeside Credit Union Payment request Amount \$30\.00 /)
    assert.ok(!page.body.includes('class="contact"'))
    assert.ok(!page.body.includes('/pay/assets/accent/'))
    assert.ok(page.body.includes('<link rel="icon" href="/favicon.ico">'))
  })

  test('the accent stylesheet and the icon are served, cacheable, to anyone; a malformed colour file is a 404 page', async () => {
    const css = await t.call('GET', '/pay/assets/accent/0f5132.css')
    assert.equal(css.status, 200)
    assert.equal(css.headers['content-type'], 'text/css; charset=utf-8')
    assert.equal(css.headers['cache-control'], 'public, max-age=86400')
    assert.equal(
      css.body,
      'button.pay {\n  background: #0f5132;\n  border-color: #0f5132;\n}\nbutton.pay:hover {\n  background: #0d452b;\n  border-color: #0d452b;\n}\na {\n  color: #0f5132;\n}\n',
    )
    for (const bad of ['0F5132.css', '0f5132', 'zzzzzz.css', '0f51320.css', '..%2Fpage.css']) {
      const r = await t.call('GET', `/pay/assets/accent/${bad}`)
      assert.equal(r.status, 404, bad)
      assert.equal(r.headers['content-type'], 'text/html; charset=utf-8')
    }
    const icon = await t.app.app.inject({ method: 'GET', url: '/favicon.ico' })
    assert.equal(icon.statusCode, 200)
    assert.equal(icon.headers['content-type'], 'image/x-icon')
    assert.equal(icon.headers['cache-control'], 'public, max-age=86400')
    const bytes = icon.rawPayload
    // An ICO: reserved 0, type 1 (icon), one image of 32x32 at 32 bits.
    assert.deepEqual(
      [bytes.readUInt16LE(0), bytes.readUInt16LE(2), bytes.readUInt16LE(4), bytes[6], bytes[7], bytes.readUInt16LE(12)],
      [0, 1, 1, 32, 32, 32],
    )
    assert.equal(bytes.readUInt32LE(14) + bytes.readUInt32LE(18), bytes.length)
  })
})
