import assert from 'node:assert/strict'
import type Stripe from 'stripe'
import { startTestApp, type TestApp } from './app.ts'
import { pageRequest } from './payments.ts'
import { generateStripeKey, type StandInOptions, type StripeStandIn, startStripeStandIn } from './stripe-stand-in.ts'

/**
 * A service pointed at a local Stripe stand-in (STRIPE_API_BASE), sharing its clock, with helpers for a client
 * configured to take payments through it: the page's Pay, Stripe's events delivered signed, reads.
 */
export interface StripeTest {
  t: TestApp
  stripe: StripeStandIn
  clock: { now: () => Date; set(iso: string): void; advance(ms: number): void }
  close(): Promise<void>
}

export async function startStripeTest(
  opts: { environment?: 'sandbox' | 'production'; env?: Record<string, string>; standIn?: StandInOptions } = {},
): Promise<StripeTest> {
  let now = new Date('2026-11-23T12:00:00.000Z')
  const clock = {
    now: () => now,
    set: (iso: string) => {
      now = new Date(iso)
    },
    advance: (ms: number) => {
      now = new Date(now.getTime() + ms)
    },
  }
  const stripe = await startStripeStandIn({ ...opts.standIn, now: () => now.getTime() })
  const t = await startTestApp(
    {
      STRIPE_API_BASE: stripe.url,
      ...(opts.environment === 'production' ? { SERVICE_ENVIRONMENT: 'production' } : {}),
      ...opts.env,
    },
    { clock },
  )
  return {
    t,
    stripe,
    clock,
    async close() {
      await t.close()
      await stripe.close()
    },
  }
}

export const webhookSecretFor = (client: string) => `whsec_${client.replace(/[^A-Za-z0-9]/g, '')}0123456789abcdef`

/** Configures Stripe for the client through the operator API, with a key the stand-in accepts. */
export async function configureStripe(s: StripeTest, client: string, secretKey = s.stripe.secretKey): Promise<void> {
  s.stripe.addKey(secretKey)
  const res = await s.t.admin('PUT', `/admin/v1/clients/${client}/payment-provider`, {
    provider: 'stripe',
    secretKey,
    webhookSecret: webhookSecretFor(client),
  })
  assert.ok(res.status === 201 || res.status === 200, `payment-provider: ${res.status} ${res.body}`)
}

export interface StripePayable {
  client: string
  requestId: string
  receivableId: string
  apiKey: string
  token: string
  path: string
}

/** A client with Stripe and an open request for USD 30.00 on a USD 100.00 Receivable (pageRequest). */
export async function stripePayable(
  s: StripeTest,
  client: string,
  body: Record<string, unknown> = {},
  secretKey = s.stripe.secretKey,
): Promise<StripePayable> {
  // Configured first: production makes no payment request for a client without a provider.
  assert.ok((await s.t.admin('PUT', `/admin/v1/clients/${client}`, { name: client })).status < 300)
  await configureStripe(s, client, secretKey)
  const made = await pageRequest(s.t, client, body)
  const path = made.hostedUrl.pathname
  return {
    client,
    requestId: made.requestId,
    receivableId: made.receivableId,
    apiKey: made.tenant.apiKey,
    token: path.slice('/pay/'.length),
    path,
  }
}

/** The page's Pay: the form POST. */
export function pressPay(s: StripeTest, p: Pick<StripePayable, 'path'>) {
  return s.t.call('POST', p.path, { rawBody: 'action=pay', contentType: 'application/x-www-form-urlencoded' })
}

/** Pay pressed, answered 303 to a stand-in session: its id. */
export async function startCheckout(s: StripeTest, p: StripePayable, mode: 'test' | 'live' = 'test'): Promise<string> {
  const res = await pressPay(s, p)
  assert.equal(res.status, 303, res.body)
  const location = String(res.headers.location)
  assert.ok(location.startsWith(`${s.stripe.url}/checkout/cs_${mode}_`), location)
  return location.slice(`${s.stripe.url}/checkout/`.length)
}

/** Delivers an event to the client's webhook URL as Stripe does (signed with its secret, or forged). */
export async function deliver(
  s: StripeTest,
  client: string,
  event: Stripe.Event,
  opts: { forged?: boolean; timestamp?: number; secret?: string } = {},
) {
  const { payload, header } = s.stripe.sign(event, opts.secret ?? webhookSecretFor(client), opts)
  return s.t.call('POST', `/providers/stripe/webhooks/${client}`, {
    rawBody: payload,
    headers: { 'content-type': 'application/json; charset=utf-8', 'stripe-signature': header },
  })
}

export const eventOf = (events: Stripe.Event[], type: string): Stripe.Event => {
  const e = events.find((x) => x.type === type)
  assert.ok(e, `no ${type} among ${events.map((x) => x.type).join(', ')}`)
  return e
}

export async function readRequest(s: StripeTest, p: StripePayable) {
  return (await s.t.call('GET', `/v1/clients/${p.client}/payment-requests/${p.requestId}`, { key: p.apiKey })).json
}

export async function readPosition(s: StripeTest, p: StripePayable) {
  return (await s.t.call('GET', `/v1/clients/${p.client}/receivables/${p.receivableId}`, { key: p.apiKey })).json.financialPosition
}

export async function countRows(s: StripeTest, sql: string, params: unknown[]): Promise<number> {
  const rows = await s.t.store.query<{ n: string }>(sql, params)
  return Number(rows[0]?.n)
}

export { generateStripeKey }
