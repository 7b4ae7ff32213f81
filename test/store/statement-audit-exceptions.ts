import type { Exception } from '../helpers/statement-audit.ts'

/**
 * The statements allowed not to name one client (docs/scaling.md, "Exceptions", lists the same): each is matched
 * by its source file and a piece of its text. A statement not routed and not named here fails
 * test/store/statement-audit.test.ts (and CI's audit of the whole suite) with its text and source.
 */
export const EXCEPTIONS: readonly Exception[] = [
  // Read only, across clients: a worker's search for the clients that have work, or a reading of all of them.
  {
    name: 'fan-out: due clients',
    source: 'src/resources/holds/client-facts-store.ts',
    sqlIncludes: 'SELECT f.client_code FROM client_fanouts f',
    reason: "the client fan-out's search; each due client is then claimed on its own (claimFanout names it)",
  },
  {
    name: 'fan-out: any pending',
    source: 'src/resources/holds/client-facts-store.ts',
    sqlIncludes: 'WHERE f.done_seq < h.last_seq) AS pending',
    reason: 'read only: tests and tools waiting until no client has a fan-out left (runUntilIdle)',
  },
  {
    name: 'retention: clients with a feed',
    source: 'src/resources/retention/store.ts',
    sqlIncludes: 'SELECT client_code FROM feed_heads ORDER BY client_code',
    reason: "the retention's search, one row per client; each client is then purged on its own",
  },
  {
    name: 'sandbox clocks: every stopped clock',
    source: 'src/sandbox/store.ts',
    sqlIncludes: 'SELECT client_code, frozen_at FROM sandbox_clocks',
    reason: 'read only, sandbox only (production has none): the workers then run each stopped client at its time',
  },
  {
    name: 'freshness sweep: every client',
    source: 'src/resources/holds/source-activity-store.ts',
    sqlIncludes: 'last_source_position, stale_recorded FROM source_activity',
    reason: "the freshness sweeper's candidates, one row per client; each is then locked on its own (lockSourceActivity)",
  },
  {
    name: 'metrics: shared state',
    source: 'src/store/shared-state.ts',
    sqlIncludes: 'AS feed_head',
    reason: '/metrics: counts over every client, read only (a multi-shard aggregate on Citus)',
  },
  {
    name: 'rewrap: clients with stale secrets',
    source: 'src/store/secret-keys.ts',
    sqlIncludes: 'SELECT DISTINCT client_code FROM',
    reason: "the rewrap's search; each client's rows are then walked and locked with its client code",
  },
  {
    name: 'secret check: ciphertexts this instance cannot open',
    source: 'src/store/secret-keys.ts',
    sqlIncludes: 'NOT LIKE $2',
    reason: 'the count at start and in /readyz, read only, nothing locked; in the usual case one statement per table that finds nothing',
  },
  {
    name: "audit: the operator's whole trail",
    source: 'src/resources/audit/store.ts',
    sqlIncludes: 'FROM audit_events a WHERE ($1::bigint IS NULL OR a.seq > $1)',
    reason: "GET /admin/v1/audit-events without a client: every client's events, read only, by the operator",
  },
  // The workers' searches for the clients with work: each client found is then claimed on its own, every statement
  // naming it (FOR UPDATE SKIP LOCKED within one client).
  {
    name: 'batches: clients with a batch to run',
    source: 'src/resources/batches/store.ts',
    sqlIncludes: 'SELECT b.client_code FROM batches b WHERE',
    reason: "the batch runner's search, read only, by each client's oldest claimable batch; the claim then names the client",
  },
  {
    name: 'refunds: clients with a refund due',
    source: 'src/resources/refunds/store.ts',
    sqlIncludes: 'SELECT f.client_code FROM refunds f WHERE',
    reason: "the refund worker's search, read only; each client's due refunds are then claimed with its client code",
  },
  {
    name: 'payment requests: clients with an expired request',
    source: 'src/resources/payment-requests/store.ts',
    sqlIncludes: 'SELECT r.client_code FROM payment_requests r',
    reason: "the expiry sweeper's search, read only; each client's requests are then expired with its client code",
  },
  {
    name: 'webhooks: endpoints with work',
    source: 'src/resources/webhooks/delivery-store.ts',
    sqlIncludes: 'SELECT e.client_code, e.integration_id FROM webhook_endpoints e',
    reason:
      "the webhook dispatcher's searches (endpoints to derive, endpoints with a delivery due), read only; each endpoint is then locked and claimed with its client code",
  },
  {
    name: 'receipts: routes with work',
    source: 'src/resources/receipts/delivery-store.ts',
    sqlIncludes: 'SELECT r.client_code FROM receipt_routes r',
    reason:
      "the receipt dispatcher's searches (routes to derive, clients with a receipt due), read only; each route is then locked and claimed with its client code",
  },
]
