-- Webhook notifications coalesced per resource, a bounded backlog, a per-window budget kept in the store, and
-- `ping` test notifications (issue 27; issue 24 item 2; docs/decisions.md, "Webhook coalescing, backlog and ping").

-- `superseded`: a newer revision of the same resource was queued for the endpoint before this one was delivered;
-- only the newer one is sent (superseded_by names it).
ALTER TABLE webhook_deliveries DROP CONSTRAINT webhook_deliveries_status_check;
ALTER TABLE webhook_deliveries ADD CONSTRAINT webhook_deliveries_status_check
  CHECK (status IN ('pending', 'delivered', 'abandoned', 'skipped', 'superseded'));
ALTER TABLE webhook_deliveries ADD COLUMN superseded_by text;
-- Feed events of this resource folded into this delivery before any attempt (their notification was never
-- queued on its own): how many, and the first one's sequence and revision.
ALTER TABLE webhook_deliveries ADD COLUMN folded_count integer NOT NULL DEFAULT 0;
ALTER TABLE webhook_deliveries ADD COLUMN folded_from_seq bigint;
ALTER TABLE webhook_deliveries ADD COLUMN folded_from_revision bigint;

-- A `ping` (POST .../webhook-endpoint/test) is a delivery without a feed event: its seq is the endpoint's scanned
-- sequence when it was asked for (it sorts among the events of that moment), so one feed event per delivery is
-- unique only for the others.
ALTER TABLE webhook_deliveries DROP CONSTRAINT webhook_deliveries_client_code_integration_id_seq_key;
CREATE UNIQUE INDEX webhook_deliveries_event_seq ON webhook_deliveries (client_code, integration_id, seq) WHERE type <> 'ping';
CREATE INDEX webhook_deliveries_log ON webhook_deliveries (client_code, integration_id, seq, delivery_id);

-- The pending delivery of a resource, found by the resource (coalescing).
CREATE INDEX webhook_deliveries_pending_resource ON webhook_deliveries (client_code, integration_id, resource_type, resource_id, seq)
  WHERE status = 'pending';

-- The per-window budget (10 notifications per endpoint per WEBHOOK_INTERVAL_MS), shared by every instance: the
-- window's start (real time) and the notifications claimed in it.
ALTER TABLE webhook_endpoints ADD COLUMN budget_window_start timestamptz;
ALTER TABLE webhook_endpoints ADD COLUMN budget_used integer NOT NULL DEFAULT 0;
-- Set when the pending backlog reached WEBHOOK_BACKLOG_LIMIT and the endpoint stopped taking new feed events;
-- cleared once it has caught up with the feed again.
ALTER TABLE webhook_endpoints ADD COLUMN lagging_since timestamptz;
