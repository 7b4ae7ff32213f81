import type { FastifyInstance } from 'fastify'
import { z } from 'zod'
import { createKeyUsage, KEY_USAGE_FLUSH_INTERVAL_MS } from './access/key-usage.ts'
import { brandingRoutes } from './admin/branding-routes.ts'
import { createBrandingService } from './admin/branding-service.ts'
import { paymentProviderRoutes } from './admin/payment-provider-routes.ts'
import { createPaymentProviderService } from './admin/payment-provider-service.ts'
import { receiptRouteAdminRoutes } from './admin/receipt-delivery-view-routes.ts'
import { adminRoutes, adminSandboxRoutes } from './admin/routes.ts'
import { createSecretRewrap, secretRoutes } from './admin/secrets-routes.ts'
import { createAdminService } from './admin/service.ts'
import type { Config } from './config.ts'
import { Problem } from './domain/problems.ts'
import { type Clock, systemClock } from './domain/time.ts'
import { registerInfraRoutes } from './http/docs.ts'
import { createAddressLimiter, createGate, type Gate, gateRecordingKeyUse } from './http/limits.ts'
import { createMetrics, registerMetrics } from './http/metrics.ts'
import { buildOpenApi } from './http/openapi.ts'
import { sendProblem } from './http/problem-response.ts'
import { defineRoute, type RouteDef } from './http/route.ts'
import { buildServer } from './http/server.ts'
import { type Resolver, systemResolver } from './outbound/destination.ts'
import { batchRoutes } from './resources/batches/routes.ts'
import { createBatchService, type OperationsByKind } from './resources/batches/service.ts'
import { bookRoutes } from './resources/book/routes.ts'
import { createBookService } from './resources/book/service.ts'
import { changeRoutes } from './resources/changes/routes.ts'
import { createChangeService } from './resources/changes/service.ts'
import { collectionRoutes } from './resources/collection/routes.ts'
import { createCollectionSummary } from './resources/collection/service.ts'
import { customerRoutes } from './resources/customers/routes.ts'
import { createCustomerService } from './resources/customers/service.ts'
import { customerStore } from './resources/customers/store.ts'
import { erasureRoutes } from './resources/erasure/routes.ts'
import { createErasureService } from './resources/erasure/service.ts'
import { financialEventRoutes } from './resources/financial-events/routes.ts'
import { createFinancialEventService } from './resources/financial-events/service.ts'
import { freshnessRoutes } from './resources/freshness/routes.ts'
import { createFreshness } from './resources/freshness/service.ts'
import { clientFactStore } from './resources/holds/client-facts-store.ts'
import { restrictionRules } from './resources/holds/restrictions.ts'
import { holdStore } from './resources/holds/store.ts'
import type { RouteDeps } from './resources/operations.ts'
import { paymentObservationRoutes } from './resources/payment-observations/routes.ts'
import { createPaymentObservationService } from './resources/payment-observations/service.ts'
import { NOT_FOUND_PAGE, PAGE_HEADERS, registerPaymentPage } from './resources/payment-requests/page.ts'
import { paymentRules } from './resources/payment-requests/payment-rules.ts'
import { providerRequests } from './resources/payment-requests/provider-side.ts'
import { paymentRequestRoutes, paymentSimulateRoutes } from './resources/payment-requests/routes.ts'
import { createPaymentRequestService } from './resources/payment-requests/service.ts'
import { createCheckout } from './resources/payments/checkout.ts'
import { paymentProviderSecretColumns, providerConfigStore } from './resources/payments/provider-config-store.ts'
import { createProviderEvents } from './resources/payments/provider-events.ts'
import { createProviderSync } from './resources/payments/provider-sync.ts'
import { registerProviderWebhooks } from './resources/payments/provider-webhook-route.ts'
import { createProviderRegistry, refundsThroughProviders } from './resources/payments/registry.ts'
import { reinstateFromProvider } from './resources/payments/reinstatement.ts'
import { createSandboxProvider } from './resources/payments/sandbox/provider.ts'
import { paymentStore } from './resources/payments/store.ts'
import { createStripeKind } from './resources/payments/stripe/adapter.ts'
import { receiptRoutes } from './resources/receipts/routes.ts'
import { createReceiptService, receiptDeliveryState } from './resources/receipts/service.ts'
import { receiptSecretColumns } from './resources/receipts/store.ts'
import { receivableRoutes } from './resources/receivables/routes.ts'
import { createReceivableService } from './resources/receivables/service.ts'
import { receivableStore } from './resources/receivables/store.ts'
import { reconciliationRoutes } from './resources/reconciliations/routes.ts'
import { createReconciliationService } from './resources/reconciliations/service.ts'
import { recoveryRoutes } from './resources/recovery/routes.ts'
import { createRecoveryService } from './resources/recovery/service.ts'
import { providerRefunds } from './resources/refunds/provider-side.ts'
import { refundRoutes } from './resources/refunds/routes.ts'
import { createRefundService } from './resources/refunds/service.ts'
import { refundStore } from './resources/refunds/store.ts'
import { snapshotRoutes } from './resources/snapshots/routes.ts'
import { createSnapshotService } from './resources/snapshots/service.ts'
import { timelineRoutes } from './resources/timeline/routes.ts'
import { createTimelineService } from './resources/timeline/service.ts'
import { webhookRoutes } from './resources/webhooks/routes.ts'
import { createWebhookService } from './resources/webhooks/service.ts'
import { webhookSecretColumns } from './resources/webhooks/store.ts'
import { createSandboxClock } from './sandbox/clock.ts'
import { sandboxClockRoutes } from './sandbox/routes.ts'
import { createSandboxClockService, sweepFreshnessAtClientTimes } from './sandbox/service.ts'
import { createSecretCheck, type EncryptedColumns, keyRingLoader } from './store/secret-keys.ts'
import type { Store } from './store/store.ts'
import { createBatchRunner } from './workers/batch-runner.ts'
import { createClientFanout } from './workers/client-fanout.ts'
import { createErasureWorker } from './workers/erasure.ts'
import { createPaymentExpiryWorker } from './workers/payment-expiry.ts'
import { createProviderSyncWorker } from './workers/provider-sync.ts'
import { createReceiptDispatcher, RECEIPT_EVENT_TYPES } from './workers/receipt-dispatcher.ts'
import { createRefundWorker } from './workers/refund-worker.ts'
import { createRetentionWorker } from './workers/retention.ts'
import { createWebhookDispatcher } from './workers/webhook-dispatcher.ts'
import { createWorker, type Worker } from './workers/worker.ts'

export interface AppOptions {
  store: Store
  config: Config
  /** The operator token's digest; a function when it is known only once the store is reachable (src/main.ts). */
  adminTokenDigest: string | (() => string)
  /**
   * False while the service waits for its database (src/main.ts): every request but /healthz and /readyz then
   * answers 503. Absent: always ready.
   */
  isReady?: () => boolean
  clock?: Clock
  /** Name resolution for webhook destinations (tests answer what they need, rebinding included). */
  resolver?: Resolver
  /** The request gate; by default the limits of `config` on this store (src/http/limits.ts). */
  gate?: Gate
}

const OpenApiDocument = z.record(z.string(), z.unknown()).meta({
  id: 'OpenApiDocument',
  examples: [{ openapi: '3.1.0', info: { title: 'Inbound Receivables Service', version: '1.0.0' }, paths: {}, components: {} }],
})

const STARTING = 'The service is starting and its database is not reachable yet. Nothing was saved. Retry with backoff.'

/** The clocks, the key ring of secrets at rest and who takes each client's payments: what every part below shares. */
function wireFoundation(store: Store, config: Config, baseClock: Clock) {
  // Sandbox: every service reads the time of the client it works for (src/sandbox/clock.ts says
  // where that client's scope is entered). Production: the base clock itself, no scope, no cost.
  const sandbox = config.environment === 'sandbox' ? createSandboxClock(baseClock) : undefined
  const clock = sandbox?.clock ?? baseClock
  const atClientTime = sandbox ? <T>(clientCode: string, fn: () => Promise<T>) => sandbox.atClientTime(store, clientCode, fn) : undefined
  const inClientTime = atClientTime ?? (<T>(_clientCode: string, fn: () => Promise<T>) => fn())
  // Every secret kept at rest is encrypted with this one key ring (src/domain/key-ring.ts); a family that stores
  // secrets adds its columns to `encryptedSecrets`, so the check at start, /readyz and the operator's rewrap cover them.
  const keyRing = keyRingLoader(store, {
    currentHex: config.webhooks.secretKeyHex,
    previousHex: config.webhooks.previousSecretKeysHex,
  })
  const encryptedSecrets: EncryptedColumns[] = [webhookSecretColumns, receiptSecretColumns, ...paymentProviderSecretColumns]
  const secretRewrap = createSecretRewrap({ store, clock: baseClock, keyRing, tables: encryptedSecrets })
  const secretCheck = createSecretCheck({ db: store, keyRing, tables: encryptedSecrets, now: () => baseClock.now().getTime() })
  // Who takes a client's payments (src/resources/payments/registry.ts): the provider its configuration names, of the
  // kinds listed here, else the sandbox provider in sandbox, else none. A provider's time is the base clock's.
  const sandboxProvider = config.environment === 'sandbox' ? createSandboxProvider() : undefined
  const registry = createProviderRegistry({
    store: providerConfigStore,
    keyRing,
    environment: config.environment,
    kinds: [createStripeKind({ apiBase: config.stripe.apiBase, now: () => baseClock.now() })],
    ...(sandboxProvider ? { sandboxProvider } : {}),
  })
  return { sandbox, clock, baseClock, atClientTime, inClientTime, keyRing, secretRewrap, secretCheck, sandboxProvider, registry }
}
type Foundation = ReturnType<typeof wireFoundation>

/** What the services are made of beside the foundation: the write path's bag and the wake-ups they give. */
interface ServiceWiring {
  config: Config
  foundation: Foundation
  /** The store, the clients' clock and the feed's wake-up: every write's transaction (executeWrite). */
  writes: RouteDeps
  webhooks: ReturnType<typeof createWebhookService>
  receipts: ReturnType<typeof createReceiptService>
  freshness: ReturnType<typeof createFreshness>
  onRefundQueued: () => void
  onClientFact: () => void
  providerSync: ReturnType<typeof createProviderSync>
  logged: (message: string) => (err: unknown) => void
  warn: (fields: Record<string, unknown>, message: string) => void
}

/** The resource services, each given the other families' store functions and rules it uses (a Pick<> in its deps type). */
function wireServices(wiring: ServiceWiring) {
  const { config, foundation, writes, webhooks, receipts, freshness, onRefundQueued, onClientFact, providerSync, logged, warn } = wiring
  const { store, clock, onFeedAppended } = writes
  const { baseClock, atClientTime, inClientTime, registry, sandboxProvider } = foundation
  return {
    customers: createCustomerService({ ...writes, restrictions: restrictionRules }),
    receivables: createReceivableService({ ...writes, holds: holdStore, restrictions: restrictionRules }),
    book: createBookService({ ...writes, holds: holdStore }),
    snapshots: createSnapshotService({ ...writes, holds: holdStore }),
    freshness,
    recovery: createRecoveryService({ ...writes, receivables: receivableStore }),
    reconciliations: createReconciliationService({
      ...writes,
      receivables: receivableStore,
      restrictions: restrictionRules,
      payments: paymentStore,
    }),
    financialEvents: createFinancialEventService(writes),
    paymentObservations: createPaymentObservationService({ ...writes, customers: customerStore, receivables: receivableStore }),
    paymentRequests: createPaymentRequestService({
      ...writes,
      ...(sandboxProvider ? { sandboxProvider } : {}),
      publicBaseUrl: config.publicBaseUrl,
      checkout: createCheckout({
        store,
        clock,
        realClock: baseClock,
        registry,
        publicBaseUrl: config.publicBaseUrl,
        requests: providerRequests,
        atClientTime: inClientTime,
        onFeedAppended,
        log: { warn },
      }),
      readBack: (clientCode, requestId) => providerSync.readBackPage(clientCode, requestId),
      onCanceled: (clientCode) => {
        providerSync.closeCheckouts(clientCode).catch(logged('ending the sessions of a canceled payment request failed'))
      },
      ...(config.environment === 'production' ? { hasProvider: providerConfigStore.hasActiveProvider } : {}),
      checkoutMode: config.environment === 'sandbox' ? 'test' : 'live',
      payments: paymentStore,
      paymentRules,
      receiptDeliveryState,
      onRefundQueued,
      ...(atClientTime ? { atClientTime } : {}),
      onFeedAppended,
    }),
    refunds: createRefundService({ ...writes, refunds: refundStore, onRefundQueued }),
    changes: createChangeService({ store }),
    webhooks,
    admin: createAdminService({
      store,
      clock,
      environment: config.environment,
      onGrantRevoked: async (tx, integrationId, clientCode) => {
        await webhooks.onGrantRevoked(tx, integrationId, clientCode)
        await receipts.onGrantRevoked(tx, integrationId, clientCode)
      },
      onClientReset: (tx, clientCode, now) => receipts.onClientReset(tx, clientCode, now),
      baseClock,
      onClientFact,
    }),
  }
}
type Services = ReturnType<typeof wireServices>

/** The route table: every family's routes, the operator's, and the OpenAPI document built from all of them. */
function wireRoutes(
  config: Config,
  foundation: Foundation,
  writes: RouteDeps,
  services: Services & {
    batches: ReturnType<typeof createBatchService>
    receipts: ReturnType<typeof createReceiptService>
    sandboxClock: ReturnType<typeof createSandboxClockService> | undefined
    providerSync: ReturnType<typeof createProviderSync>
    erasure: ReturnType<typeof createErasureService>
  },
): RouteDef[] {
  const { store } = writes
  const { baseClock, keyRing, secretRewrap } = foundation
  // The timeline and erasure serve integrations and operators alike: their operator routes are documented with the
  // operator API (/admin/v1/openapi.json), the others with v1.
  const both = [...timelineRoutes(createTimelineService({ store })), ...erasureRoutes(writes, services.erasure)]
  const v1Routes = both.filter((r) => !r.path.startsWith('/admin/'))
  const routes: RouteDef[] = [
    ...customerRoutes(writes, services.customers),
    ...receivableRoutes(writes, services.receivables),
    ...v1Routes,
    ...financialEventRoutes(writes, services.financialEvents),
    ...paymentObservationRoutes(writes, services.paymentObservations),
    ...paymentRequestRoutes(writes, services.paymentRequests),
    ...refundRoutes(writes, services.refunds),
    ...changeRoutes(services.changes),
    ...batchRoutes(writes, services.batches),
    ...bookRoutes(writes, services.book),
    ...snapshotRoutes(writes, services.snapshots),
    ...freshnessRoutes(store, services.freshness),
    ...recoveryRoutes(writes, services.recovery),
    ...reconciliationRoutes(writes, services.reconciliations),
    ...collectionRoutes(store, createCollectionSummary({ clock: writes.clock })),
    ...webhookRoutes(writes, services.webhooks),
    ...receiptRoutes(writes, services.receipts),
    ...adminRoutes(services.admin, store, { serverUrl: config.publicBaseUrl, docsUrl: config.docsUrl }, [
      ...both.filter((r) => r.path.startsWith('/admin/')),
      ...paymentSimulateRoutes(writes, services.paymentRequests, { sandbox: config.environment === 'sandbox' }),
      ...sandboxClockRoutes(services.sandboxClock),
      ...adminSandboxRoutes(services.admin, { sandbox: config.environment === 'sandbox' }),
      ...secretRoutes(secretRewrap),
      ...brandingRoutes(createBrandingService({ store, clock: baseClock })),
      ...receiptRouteAdminRoutes(store, baseClock),
      ...paymentProviderRoutes(
        createPaymentProviderService({
          store,
          clock: baseClock,
          environment: config.environment,
          keyRing,
          publicBaseUrl: config.publicBaseUrl,
          sync: (clientCode) => services.providerSync.sync(clientCode),
        }),
      ),
    ]),
  ]
  let document: Record<string, unknown> | undefined
  const openapiRoute = defineRoute({
    method: 'GET',
    path: '/v1/openapi.json',
    operationId: 'getOpenApi',
    summary: 'The OpenAPI 3.1 document of this API',
    description:
      'This document: the OpenAPI 3.1 description of every operation, generated from the same schemas that validate requests. No API key is needed.',
    tags: ['Specification'],
    auth: { kind: 'none' },
    responses: { 200: { schema: OpenApiDocument, description: 'OpenAPI 3.1, version 1.0.0' } },
    problems: [],
    public: true,
    handler: async () => {
      document ??= buildOpenApi(allRoutes, { serverUrl: config.publicBaseUrl, docsUrl: config.docsUrl })
      return { status: 200, body: document }
    },
  })
  const allRoutes = [...routes, openapiRoute]
  return allRoutes
}

/** What the HTTP server is made of beside the route table. */
interface HttpWiring {
  options: AppOptions
  foundation: Foundation
  routes: RouteDef[]
  keyUsage: ReturnType<typeof createKeyUsage>
  metrics: ReturnType<typeof createMetrics>
  paymentRequests: Services['paymentRequests']
  writes: RouteDeps
  onRefundQueued: () => void
}

/** The Fastify server: the route table behind the gate, infrastructure routes, metrics, the hosted page, Stripe's events. */
function wireHttp({ options, foundation, routes, keyUsage, metrics, paymentRequests, writes, onRefundQueued }: HttpWiring) {
  const { store, config, adminTokenDigest, gate, isReady } = options
  const { baseClock, atClientTime, inClientTime, registry, secretCheck } = foundation
  const app = buildServer(
    {
      db: store,
      config,
      gate: gateRecordingKeyUse(
        gate ?? createGate(store, { perMinute: config.limits.perMinute, concurrency: config.limits.concurrencyPerKey, clock: baseClock }),
        (apiKeyId) => keyUsage.record(apiKeyId),
      ),
      adminTokenDigest,
      ...(atClientTime ? { atClientTime } : {}),
      pages: [{ prefix: '/pay/', notFound: { headers: PAGE_HEADERS, html: NOT_FOUND_PAGE } }],
    },
    routes,
  )
  // Waiting for the database: liveness and readiness answer (200, and 503 from the failing store), nothing else
  // reaches a route, whose store would fail anyway; a client retries after the Retry-After.
  if (isReady) {
    app.addHook('onRequest', async (request, reply) => {
      if (isReady()) return
      const path = request.url.split('?')[0]
      if (path === '/healthz' || path === '/readyz') return
      return sendProblem(
        request,
        reply,
        new Problem('projection_unavailable', STARTING, { headers: { 'retry-after': '5' } }),
        config.docsUrl,
      )
    })
  }
  registerInfraRoutes(app, store, routes, { degraded: () => secretCheck.readiness() })
  // Prometheus text at /metrics, behind the operator token (src/http/metrics.ts).
  registerMetrics(app, metrics, adminTokenDigest)
  // The page's flood guard per client address, in this process's memory, on the base clock (src/http/limits.ts).
  registerPaymentPage(app, paymentRequests, {
    limiter: createAddressLimiter({ perMinute: config.limits.payPerMinute, clock: baseClock }),
    checkoutOrigins: registry.kinds.flatMap((k) => k.checkoutOrigins),
  })
  // Each client's provider events (docs/design/payment-providers.md): public, verified by signature, outside the route table.
  const providerEvents = createProviderEvents({
    store,
    clock: writes.clock,
    realClock: baseClock,
    registry,
    requests: providerRequests,
    refunds: providerRefunds,
    reinstate: reinstateFromProvider,
    atClientTime: inClientTime,
    onFeedAppended: writes.onFeedAppended,
    onRefundQueued,
    log: app.log,
  })
  registerProviderWebhooks(app, providerEvents)
  return { app, providerEvents }
}

/**
 * At start, before the first request: how many stored secrets this instance's key ring cannot open, in one log
 * line and in /readyz (src/store/secret-keys.ts, createSecretCheck). Nothing is re-encrypted at start: other
 * instances may not hold this one's current key yet, and a rewrap would move their secrets out of their reach;
 * the rewrap is the operator's step (POST /admin/v1/secrets/rewrap, `inbound secrets rewrap`) once every instance
 * holds the new key (docs/operations.md, "Rotating WEBHOOK_SECRET_KEY"). A failure is logged and does not stop the
 * start. A process that waits for its database (src/main.ts, `isReady`) runs it once the store answers instead.
 */
function secretCheckAtStart(app: FastifyInstance, secretCheck: Foundation['secretCheck'], isReady: AppOptions['isReady']) {
  const checkSecretsAtStart = async () => {
    try {
      const unreadable = await secretCheck.run()
      if (unreadable > 0) {
        app.log.warn(
          { unreadable },
          'this instance holds no key that opens some stored secrets (encrypted under a key not in its WEBHOOK_SECRET_KEY or WEBHOOK_SECRET_KEY_PREVIOUS): add that key to its ring and restart it; /readyz reports it meanwhile (docs/operations.md)',
        )
      }
    } catch (err) {
      app.log.error({ errMessage: (err as Error).message }, 'checking stored secrets against the key ring failed')
    }
  }
  app.addHook('onReady', async () => {
    if (!isReady || isReady()) await checkSecretsAtStart()
  })
  return checkSecretsAtStart
}

/** The periodic workers: the payment expiry sweep, retention, the refund worker, key usage, the freshness sweep. */
function periodicWorkers(
  config: Config,
  foundation: Foundation,
  writes: RouteDeps,
  refundWorker: Worker,
  keyUsage: ReturnType<typeof createKeyUsage>,
  sweepFreshness: () => Promise<number>,
  logged: (message: string) => (err: unknown) => void,
): Worker[] {
  const { store, onFeedAppended } = writes
  const { sandbox, baseClock } = foundation
  return [
    // Records the expiry of open Payment requests nobody reads, so the change feed hears of each.
    createPaymentExpiryWorker({ store, clock: baseClock, sandbox, onFeedAppended, onError: logged('payment request expiry sweep failed') }),
    createRetentionWorker({ db: store, sandbox, onError: logged('retention failed') }),
    refundWorker,
    // Writes the API keys' last use off the request path, at most once a minute per key, and once more at stop.
    createWorker({
      name: 'api-key-usage',
      intervalMs: KEY_USAGE_FLUSH_INTERVAL_MS,
      firstTurnAfterMs: KEY_USAGE_FLUSH_INTERVAL_MS,
      runOnce: async () => (await keyUsage.flush()) > 0,
      afterStop: async () => {
        await keyUsage.flush().catch(logged('api key usage flush failed'))
      },
      onError: logged('api key usage flush failed'),
    }),
    // Flips the recorded freshness of Sources that went quiet (hold source_stale): one client fact each, whose
    // Receivable revisions the client fan-out gives in the background.
    createWorker({
      name: 'freshness-sweep',
      intervalMs: config.freshness.sweepMs,
      firstTurnAfterMs: config.freshness.sweepMs,
      runOnce: async () => (await sweepFreshness()) > 0,
      onError: logged('freshness sweep failed'),
    }),
  ]
}

/**
 * Erasure of a Customer's personal data: the request records it, its worker follows it up in bounded chunks, and
 * `PERSONAL_DATA_RETENTION_DAYS` (when set) erases Customers whose Receivables have all been closed that long.
 */
function wireErasure(config: Config, foundation: Foundation, writes: RouteDeps, onError: (err: unknown) => void) {
  const { store, clock } = writes
  const erasure = createErasureService({ store, clock, customers: customerStore, onRecorded: () => erasureWorkers.worker.wake() })
  const erasureWorkers = createErasureWorker({
    store,
    clock: foundation.baseClock,
    erasure,
    retentionDays: config.personalDataRetentionDays,
    onError,
  })
  return { erasure, erasureWorkers }
}

/**
 * A delivery whose signing secret this instance's key ring cannot open is left to an instance whose ring can
 * (src/workers/delivery-engine.ts): one line per target, never the secret or the URL.
 */
function unreadableSecretLog(app: FastifyInstance) {
  return (fields: { channel: string; target: string }) =>
    app.log.warn(
      fields,
      'a signing secret this instance cannot open: left to an instance whose key ring holds its key (WEBHOOK_SECRET_KEY, WEBHOOK_SECRET_KEY_PREVIOUS; docs/operations.md)',
    )
}

/**
 * The one wiring root of the HTTP process, in this order: the foundation (clocks, secrets, providers), the services,
 * the route table, the server, the workers. Parts that wake each other (a commit wakes the dispatchers, a pending
 * refund the refund worker) are named here, where a reader sees both ends.
 */
export function createApp(options: AppOptions) {
  const { store, config, clock: baseClock = systemClock, resolver = systemResolver, isReady } = options
  const foundation = wireFoundation(store, config, baseClock)
  const { sandbox, clock, baseClock: realClock, atClientTime, keyRing, secretRewrap, secretCheck, registry, sandboxProvider } = foundation
  const webhooks = createWebhookService({
    store,
    clock,
    resolver,
    allowLoopback: config.webhooks.allowLoopback,
    keyRing,
    backlogLimit: config.webhooks.backlogLimit,
    // A retry or a ping committed: the dispatcher takes a turn within a second (inside the endpoint's budget).
    onQueued: () => webhookDispatcher.wake(),
  })
  // The client's receipt-posting route (src/resources/receipts); its dispatcher sends the receipts.
  const receipts = createReceiptService({
    store,
    clock,
    resolver,
    allowLoopback: config.webhooks.allowLoopback,
    keyRing,
    // The PUT's test receipt is due a second after COMMIT: the dispatcher takes a turn then.
    onQueued: (inMs) => receiptDispatcher.wakeIn(inMs),
  })
  // Each factory receives the other families' store functions and rules it uses (a Pick<> in its deps type).
  // Every commit that appended change-feed events wakes the webhook dispatcher, and the receipt dispatcher when one of
  // them can give a receipt (src/workers/worker.ts coalesces the wake-ups; the webhook budget still holds). Told
  // without types (a worker's commit), both wake. After COMMIT: a failing wake-up is logged, nothing more.
  const onFeedAppended = (types?: ReadonlySet<string>) => {
    try {
      webhookDispatcher.wake()
      if (!types || RECEIPT_EVENT_TYPES.some((t) => types.has(t))) receiptDispatcher.wake()
    } catch (err) {
      app.log.error({ errMessage: (err as Error).message }, 'delivery wake-up failed')
    }
  }
  const writes: RouteDeps = { store, clock, onFeedAppended }
  const logged = (message: string) => (err: unknown) => app.log.error({ errMessage: (err as Error).message }, message)
  const loggedWithStack = (message: string) => (err: unknown) =>
    app.log.error({ errMessage: (err as Error).message, stack: (err as Error).stack }, message)
  // A refund recorded pending (the PUT, or a confirmation's unapplied money): the refund worker asks the provider now.
  const onRefundQueued = () => refundWorker.wake()
  // Client-wide changes (collection toggles, freshness flips) record one fact; this worker gives each Receivable
  // its new revision and event in the background (src/workers/client-fanout.ts).
  const clientFanout = createClientFanout({ store, onFeedAppended, onError: loggedWithStack('client fan-out error') })
  const freshness = createFreshness({
    clock,
    thresholds: config.freshness,
    clientFacts: clientFactStore,
    onFact: () => clientFanout.wake(),
  })
  const onClientFact = () => clientFanout.wake()
  // The catch-up with each client's provider (src/resources/payments/provider-sync.ts), over the same event
  // handling as the webhook route (`providerEvents`, made below with the route).
  const providerSync = createProviderSync({
    store,
    realClock,
    registry,
    events: { handle: (...a) => providerEvents.handle(...a), readBack: (...a) => providerEvents.readBack(...a) },
  })
  const warn = (fields: Record<string, unknown>, message: string) => app.log.warn(fields, message)
  const services = wireServices({
    config,
    foundation,
    writes,
    webhooks,
    receipts,
    freshness,
    onRefundQueued,
    onClientFact,
    providerSync,
    logged,
    warn,
  })
  const operations: OperationsByKind = {
    customer: services.customers.putOperation,
    receivable: services.receivables.put,
    payment_observation: services.paymentObservations.put,
    ...services.financialEvents.operations,
  }
  // One registry per app instance (src/http/metrics.ts); the batch runner reports the records it committed.
  const metrics = createMetrics(store)
  const batchRunner = createBatchRunner({
    store,
    clock,
    operations,
    chunkSize: config.batches.chunkSize,
    leaseSeconds: config.batches.leaseSeconds,
    pollMs: config.batches.pollMs,
    concurrency: config.batches.concurrency,
    onRecordsProcessed: (n) => metrics.recordsProcessed(n),
    onFeedAppended,
    ...(atClientTime ? { atClientTime } : {}),
    onError: loggedWithStack('batch runner error'),
  })
  const batches = createBatchService({ store, clock, operations, docsUrl: config.docsUrl, onQueued: () => batchRunner.wake() })
  // Sandbox only: the operator's per-client clock (absent in production, so its routes are too).
  const sandboxClock = sandbox
    ? createSandboxClockService({ store, sandbox, freshness, drainClientFacts: (c) => clientFanout.runClientUntilIdle(c) })
    : undefined
  const { erasure, erasureWorkers } = wireErasure(config, foundation, writes, (err) =>
    app.log.error({ errMessage: (err as Error).message }, 'erasure failed'),
  )
  const allRoutes = wireRoutes(config, foundation, writes, { ...services, batches, receipts, sandboxClock, providerSync, erasure })
  // Each key's last use: noted in memory by the gate, written by the worker below (src/access/key-usage.ts).
  const keyUsage = createKeyUsage({ db: store, clock: baseClock })
  const { app, providerEvents } = wireHttp({
    options,
    foundation,
    routes: allRoutes,
    keyUsage,
    metrics,
    paymentRequests: services.paymentRequests,
    writes,
    onRefundQueued,
  })
  const onUnreadableSecret = unreadableSecretLog(app)
  const webhookDispatcher = createWebhookDispatcher({
    store,
    clock,
    resolver,
    allowLoopback: config.webhooks.allowLoopback,
    keyRing,
    intervalMs: config.webhooks.intervalMs,
    retryScheduleMs: config.webhooks.retryScheduleMs,
    backlogLimit: config.webhooks.backlogLimit,
    ...(sandbox ? { sandbox } : {}),
    onUnreadableSecret,
    onError: (err) => app.log.error({ errMessage: (err as Error).message, stack: (err as Error).stack }, 'webhook dispatcher error'),
  })
  // Receipts to the Source (docs/design/receipt-delivery.md): on the webhooks' schedule and destination rules, real time.
  const receiptDispatcher = createReceiptDispatcher({
    store,
    clock: baseClock,
    resolver,
    allowLoopback: config.webhooks.allowLoopback,
    keyRing,
    intervalMs: config.webhooks.intervalMs,
    retryScheduleMs: config.webhooks.retryScheduleMs,
    onUnreadableSecret,
    onError: (err) => app.log.error({ errMessage: (err as Error).message, stack: (err as Error).stack }, 'receipt dispatcher error'),
  })
  const checkSecretsAtStart = secretCheckAtStart(app, secretCheck, isReady)
  /** The periodic freshness sweep (src/main.ts): in sandbox, each client at its own time. */
  const sweepFreshness = () => (sandbox ? sweepFreshnessAtClientTimes(store, sandbox, freshness) : freshness.sweep(store))
  // Asks the payment provider for pending refunds, outside any transaction, and records its decisions.
  const refundWorker = createRefundWorker({
    store,
    clock: baseClock,
    clientClock: clock,
    // Each Payment's refund through the provider that made it (a Stripe Payment through its client's Stripe).
    provider: refundsThroughProviders(registry, store, sandboxProvider),
    ...(atClientTime ? { atClientTime } : {}),
    onFeedAppended,
    onError: logged('refund worker failed'),
  })
  // The catch-up sweep of every client's provider events (src/workers/provider-sync.ts); absent when turned off.
  const providerSyncWorker = createProviderSyncWorker({
    store,
    sync: providerSync,
    intervalSeconds: config.providerSync.intervalSeconds,
    onError: logged('payment provider catch-up sweep failed'),
  })
  // Every background worker of the process, in one list: src/main.ts starts and stops them together.
  const workers: Worker[] = [
    ...(providerSyncWorker ? [providerSyncWorker] : []),
    batchRunner,
    webhookDispatcher,
    receiptDispatcher,
    clientFanout,
    ...periodicWorkers(config, foundation, writes, refundWorker, keyUsage, sweepFreshness, logged),
    erasureWorkers.worker,
    ...(erasureWorkers.retention ? [erasureWorkers.retention] : []),
  ]
  return {
    app,
    services: { ...services, batches },
    operations,
    routes: allRoutes,
    batchRunner,
    webhookDispatcher,
    receiptDispatcher,
    clientFanout,
    refundWorker,
    providerSync,
    erasureWorkers,
    keyUsage,
    metrics,
    sandbox,
    sandboxClock,
    sweepFreshness,
    workers,
    secretRewrap,
    secretCheck,
    checkSecretsAtStart,
  }
}

export type App = ReturnType<typeof createApp>
