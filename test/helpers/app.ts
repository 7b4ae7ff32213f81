import type { InjectOptions } from 'fastify'
import { digestSecret } from '../../src/access/keys.ts'
import { createApp } from '../../src/app.ts'
import { loadConfig } from '../../src/config.ts'
import { SCOPES, type Scope } from '../../src/domain/scopes.ts'
import type { Clock } from '../../src/domain/time.ts'
import type { Resolver } from '../../src/outbound/destination.ts'
import type { Store } from '../../src/store/store.ts'
import { createTestDatabase, type TestDatabase } from './store.ts'

export const ADMIN_TOKEN = 'test-operator-token-0123456789abcdef'

export interface Response {
  status: number
  headers: Record<string, string | number | string[] | undefined>
  body: string
  // biome-ignore lint/suspicious/noExplicitAny: test responses are inspected field by field
  json: any
}

export interface Tenant {
  clientCode: string
  integrationId: string
  apiKey: string
  apiKeyId: string
}

export interface CallOptions {
  key?: string | null
  body?: unknown
  rawBody?: string
  headers?: Record<string, string>
  remoteAddress?: string
  contentType?: string
}

export interface TestApp {
  db: TestDatabase
  store: Store
  app: ReturnType<typeof createApp>
  call(method: InjectOptions['method'], url: string, opts?: CallOptions): Promise<Response>
  admin(method: InjectOptions['method'], url: string, body?: unknown): Promise<Response>
  /** A client with an integration, a grant (every scope unless narrowed) and one API key. */
  tenant(
    clientCode: string,
    opts?: { scopes?: readonly Scope[]; ipAllowlist?: string[]; integrationId?: string; grant?: Record<string, unknown> },
  ): Promise<Tenant>
  close(): Promise<void>
}

/**
 * Starts the real app (Fastify, real store) for one test file. Limits default to very high values so
 * that tests which are not about limits never meet them; the limit tests pass the spec's values.
 */
export async function startTestApp(
  env: Record<string, string> = {},
  opts: { clock?: Clock; db?: TestDatabase; resolver?: Resolver } = {},
): Promise<TestApp> {
  const db = opts.db ?? (await createTestDatabase())
  const config = loadConfig({
    ADMIN_TOKEN,
    SEED_DEMO: '0',
    LOG_LEVEL: 'silent',
    RATE_LIMIT_PER_MINUTE: '1000000',
    CONCURRENCY_PER_KEY: '1000',
    PAY_RATE_LIMIT_PER_MINUTE: '1000000',
    PUBLIC_BASE_URL: 'http://irs.test',
    DOCS_URL: 'https://docs.irs.test',
    // Production refuses to start without it; tests that start in production need one.
    WEBHOOK_SECRET_KEY: 'ab'.repeat(32),
    ...env,
  })
  const app = createApp({
    store: db.store,
    config,
    adminTokenDigest: digestSecret(ADMIN_TOKEN),
    ...(opts.clock ? { clock: opts.clock } : {}),
    ...(opts.resolver ? { resolver: opts.resolver } : {}),
  })
  await app.app.ready()

  const call: TestApp['call'] = async (method, url, o = {}) => {
    const headers: Record<string, string> = { ...o.headers }
    if (o.key) headers.authorization = `Bearer ${o.key}`
    let payload: string | undefined
    if (o.rawBody !== undefined) payload = o.rawBody
    else if (o.body !== undefined) payload = JSON.stringify(o.body)
    if (payload !== undefined && !('content-type' in headers)) {
      headers['content-type'] = o.contentType ?? (method === 'PATCH' ? 'application/merge-patch+json' : 'application/json')
    }
    const res = await app.app.inject({
      method,
      url,
      headers,
      ...(payload !== undefined ? { payload } : {}),
      ...(o.remoteAddress ? { remoteAddress: o.remoteAddress } : {}),
    })
    let json: unknown
    try {
      json = res.body ? JSON.parse(res.body) : undefined
    } catch {
      json = undefined
    }
    return { status: res.statusCode, headers: res.headers, body: res.body, json }
  }

  const adminCall: TestApp['admin'] = (method, url, body) =>
    call(method, url, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` }, ...(body !== undefined ? { body } : {}) })

  return {
    db,
    store: db.store,
    app,
    call,
    admin: adminCall,
    async tenant(clientCode, t = {}) {
      const integrationId = t.integrationId ?? `int-${clientCode}`
      const must = (r: Response, what: string) => {
        if (r.status >= 300) throw new Error(`${what}: ${r.status} ${r.body}`)
        return r
      }
      must(await adminCall('PUT', `/admin/v1/clients/${clientCode}`, { name: clientCode }), 'client')
      must(await adminCall('PUT', `/admin/v1/integrations/${integrationId}`, { name: integrationId }), 'integration')
      must(
        await adminCall('PUT', `/admin/v1/integrations/${integrationId}/grants/${clientCode}`, {
          scopes: t.scopes ?? [...SCOPES],
          ...(t.ipAllowlist ? { ipAllowlist: t.ipAllowlist } : {}),
          ...t.grant,
        }),
        'grant',
      )
      const key = must(await adminCall('POST', `/admin/v1/integrations/${integrationId}/api-keys`, {}), 'key').json
      return { clientCode, integrationId, apiKey: key.apiKey, apiKeyId: key.apiKeyId }
    },
    async close() {
      await app.app.close()
      if (!opts.db) await db.drop()
    },
  }
}

/** Asserts the shape every problem response must have and returns its body. */
export function problemCode(res: Response): string {
  return String(res.json?.type ?? '').replace('https://docs.irs.test/problems/', '')
}
