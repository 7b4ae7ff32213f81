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
  // Workers' claims and polls across clients, rewritten to claim per client by other work in progress (issue 37).
  {
    name: 'batches: the claim',
    source: 'src/resources/batches/store.ts',
    sqlIncludes: "UPDATE batches b SET status = 'running'",
    reason: 'the batch claim (FOR UPDATE SKIP LOCKED over every client): being rewritten to claim per client',
  },
  {
    name: 'webhooks: endpoint scan',
    source: 'src/resources/webhooks/delivery-store.ts',
    sqlIncludes: 'FROM webhook_endpoints e',
    reason: "the dispatcher's scan of endpoints and due deliveries over every client: being rewritten to claim per client",
  },
  {
    name: 'webhooks: attempt recording',
    source: 'src/resources/webhooks/delivery-store.ts',
    sqlIncludes: 'UPDATE webhook_deliveries d SET status = CASE',
    reason: "correlated subqueries name the client through the outer row: being rewritten with the dispatcher's claims",
  },
  {
    name: 'webhooks: due deliveries of an endpoint',
    source: 'src/resources/webhooks/delivery-store.ts',
    sqlIncludes: 'WITH cand AS (',
    reason: "a UNION of two claims of one endpoint, planned apart: being rewritten with the dispatcher's claims",
  },
  {
    name: 'receipts: route scan',
    source: 'src/resources/receipts/delivery-store.ts',
    sqlIncludes: 'FROM receipt_routes r',
    reason: "the receipt dispatcher's scan of routes and due receipts over every client: being rewritten to claim per client",
  },
  {
    name: 'refunds: the claim',
    source: 'src/resources/refunds/store.ts',
    sqlIncludes: 'FROM refunds WHERE status = ',
    reason: "the refund worker's claim over every client: being rewritten to claim per client",
  },
  {
    name: 'payment requests: the expiry sweep',
    source: 'src/resources/payment-requests/store.ts',
    sqlIncludes: "UPDATE payment_requests p SET status = 'expired'",
    reason:
      "the expiry sweeper's claim over every client (and a client's pass whose outer UPDATE joins through the claim): being rewritten to claim per client",
  },
]
