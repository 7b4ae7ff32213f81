import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client'
import { readSharedState } from '../store/shared-state.ts'
import type { Store } from '../store/store.ts'
import { assertOperatorToken } from './admission.ts'

/**
 * `GET /metrics`: Prometheus text exposition (format 0.0.4), behind the operator token (docs/operations.md lists
 * every metric; docs/decisions.md, "Metrics", says why it is shaped so).
 *
 * - One registry per app instance, never prom-client's global one: several apps in one process (tests, a tool
 *   that starts two) each count their own traffic, and creating a second app cannot fail on a name already
 *   registered.
 * - Labels are bounded and name nothing of a tenant: a route is its template (`/v1/clients/:clientCode/...`),
 *   never the URL; an unmatched URL is `unmatched`; no client code, external id, key or secret is ever a label.
 * - What happens in this process (requests, their latency, refusals, batch records run) is a counter or a
 *   histogram of this process: Prometheus sums instances. What is database state shared by every instance
 *   (the batch queue, the change-feed head, webhook deliveries by status) is read from the store at scrape time,
 *   in one statement, so every instance reports the same truth (sum() over instances would double it; use
 *   max()). If that read fails the scrape still answers, with `irs_store_up 0` and without those gauges, so
 *   the process's own metrics stay visible while the store is down.
 */

/** Which limit refused a request, as src/http/admission.ts records it, and the label value each is exported as. */
const LIMIT_LABEL = { rate: 'per_minute', concurrency: 'concurrency' } as const
const DELIVERY_STATUSES = ['pending', 'delivered', 'abandoned', 'skipped', 'superseded'] as const
const UNMATCHED_ROUTE = 'unmatched'

/** Seconds; from well under a millisecond (a read on PGlite) to the 10 s a checkout may wait for PostgreSQL. */
const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]

export interface Metrics {
  /** The registry of this app instance (exposed for tests and tools; the route is `GET /metrics`). */
  readonly registry: Registry
  /**
   * Batch records whose outcome was committed by this process's batch runner (each record once: call it after
   * the chunk's transaction committed, with the number of records it decided).
   */
  recordsProcessed(n: number): void
  /** Counts one answered request (the `onResponse` hook of `registerMetrics`). */
  observe(request: FastifyRequest, reply: FastifyReply): void
  /** The exposition text: reads the shared state from the store first. */
  scrape(log?: { warn(obj: Record<string, unknown>, msg: string): void }): Promise<string>
  readonly contentType: string
}

export function createMetrics(store: Pick<Store, 'kind' | 'query' | 'poolStats'>): Metrics {
  const registry = new Registry()
  // Process metrics (CPU, memory, event-loop delay, GC) start with the first scrape: an app nobody scrapes (most
  // tests, the CLI) sets up no observers.
  let processMetrics = false
  const registers = [registry]
  // Gauges whose value is the database's: kept in a registry of their own, left out of a scrape that could not
  // read them (a stale or zero value would be read as the truth).
  const storeRegistry = new Registry()
  const storeRegisters = [storeRegistry]

  const requests = new Counter({
    name: 'irs_http_requests_total',
    help: 'HTTP requests answered, by method, route template and status code.',
    labelNames: ['method', 'route', 'status'] as const,
    registers,
  })
  const duration = new Histogram({
    name: 'irs_http_request_duration_seconds',
    help: 'Time from receiving a request to the end of its response, by method, route template and status code.',
    labelNames: ['method', 'route', 'status'] as const,
    buckets: LATENCY_BUCKETS,
    registers,
  })
  const rateLimited = new Counter({
    name: 'irs_http_rate_limited_total',
    help: 'Requests refused with 429 rate_limit_exceeded, by the limit that refused them (per_minute or concurrency).',
    labelNames: ['limit'] as const,
    registers,
  })
  for (const limit of Object.values(LIMIT_LABEL)) rateLimited.labels(limit).inc(0)
  const processed = new Counter({
    name: 'irs_batch_records_processed_total',
    help: "Batch records whose outcome this process's batch runner committed (succeeded, failed or dependency_failed).",
    registers,
  })
  const storeUp = new Gauge({
    name: 'irs_store_up',
    help: 'Whether this scrape could read the shared state from the store (1) or not (0: the store gauges are left out).',
    registers,
  })
  new Gauge({
    name: 'irs_store_info',
    help: 'The store engine of this instance (value always 1).',
    labelNames: ['engine'] as const,
    registers,
  })
    .labels(store.kind)
    .set(1)
  if (store.poolStats) {
    const pool = store.poolStats.bind(store)
    new Gauge({
      name: 'irs_store_pool_connections',
      help: 'Store connections open now, by state (in_use or idle). PGlite has one backend.',
      labelNames: ['state'] as const,
      registers,
      collect() {
        const s = pool()
        this.labels('in_use').set(s.total - s.idle)
        this.labels('idle').set(s.idle)
      },
    })
    new Gauge({
      name: 'irs_store_pool_max_connections',
      help: 'Store connections this instance may open at most (DATABASE_URL pool size; 1 on PGlite).',
      registers,
      collect() {
        this.set(pool().max)
      },
    })
    new Gauge({
      name: 'irs_store_pool_waiting',
      help: 'Work waiting for a store connection: checkouts of a full pool (PostgreSQL), calls queued behind the running one (PGlite).',
      registers,
      collect() {
        this.set(pool().waiting)
      },
    })
  }

  const feedHead = new Gauge({
    name: 'irs_change_feed_head_sequence',
    help: 'The highest change-feed sequence over all clients of the store (database state: the same on every instance).',
    registers: storeRegisters,
  })
  const queueBatches = new Gauge({
    name: 'irs_batch_queue_batches',
    help: 'Batches not finished, by status (queued or running); database state, the same on every instance.',
    labelNames: ['status'] as const,
    registers: storeRegisters,
  })
  const queueRecords = new Gauge({
    name: 'irs_batch_queue_records',
    help: 'Records still pending in batches not finished; database state, the same on every instance.',
    registers: storeRegisters,
  })
  const deliveries = new Gauge({
    name: 'irs_webhook_deliveries',
    help: 'Webhook deliveries kept (30 days), by status (pending, delivered, abandoned, skipped, superseded); database state, the same on every instance.',
    labelNames: ['status'] as const,
    registers: storeRegisters,
  })
  const lagging = new Gauge({
    name: 'irs_webhook_endpoints_lagging',
    help: 'Webhook endpoints whose pending backlog reached WEBHOOK_BACKLOG_LIMIT and that have not caught up with the change feed since; database state, the same on every instance.',
    registers: storeRegisters,
  })

  async function readStore(): Promise<void> {
    const row = await readSharedState(store)
    if (!row) throw new Error('the store state query returned no row')
    feedHead.set(Number(row.feed_head))
    queueBatches.labels('queued').set(Number(row.batches_queued))
    queueBatches.labels('running').set(Number(row.batches_running))
    queueRecords.set(Number(row.records_pending))
    for (const status of DELIVERY_STATUSES) deliveries.labels(status).set(Number(row.deliveries?.[status] ?? 0))
    lagging.set(Number(row.endpoints_lagging))
  }

  return {
    registry,
    contentType: registry.contentType,
    recordsProcessed(n) {
      if (!Number.isInteger(n) || n < 0) throw new RangeError(`recordsProcessed takes a count, not ${n}`)
      processed.inc(n)
    },
    observe(request, reply) {
      const labels = {
        method: request.method,
        // The template the router matched; undefined for the not-found handler (whose URL is anything a client sent).
        route: request.routeOptions.url ?? UNMATCHED_ROUTE,
        status: String(reply.statusCode),
      }
      requests.inc(labels)
      duration.observe(labels, reply.elapsedTime / 1000)
      const refusedBy = request.exchange?.refusedBy
      if (refusedBy && reply.statusCode === 429) rateLimited.labels(LIMIT_LABEL[refusedBy]).inc()
    },
    async scrape(log) {
      if (!processMetrics) {
        processMetrics = true
        collectDefaultMetrics({ register: registry })
      }
      let up = true
      try {
        await readStore()
      } catch (err) {
        up = false
        const e = err as { name?: string; code?: string; message?: string }
        log?.warn({ errName: e.name, errCode: e.code, errMessage: e.message }, 'metrics: the store state could not be read')
      }
      storeUp.set(up ? 1 : 0)
      const own = await registry.metrics()
      return up ? `${own}\n${await storeRegistry.metrics()}` : own
    },
  }
}

/**
 * Counts every answered request of `app` and serves `GET /metrics`, behind the operator token exactly as the
 * operator routes are (`assertOperatorToken`: 401 `invalid_admin_token` otherwise). Called right after
 * `buildServer`, before the app is ready, so the hook covers every route.
 */
export function registerMetrics(app: FastifyInstance, metrics: Metrics, adminTokenDigest: string | (() => string)): void {
  app.addHook('onResponse', async (request, reply) => metrics.observe(request, reply))
  app.get('/metrics', {
    onRequest: async (request) => assertOperatorToken(request.headers.authorization, adminTokenDigest),
    handler: async (request, reply) => {
      const text = await metrics.scrape(request.log)
      return reply.type(metrics.contentType).send(text)
    },
  })
}
