-- A Receivable's timeline (docs/decisions.md, "A Receivable's timeline"): built from what the service already
-- records, read one Receivable's index range per source table a page.

-- Who made a change-feed event: recorded from now on, on the feed row itself (the smallest place that every write
-- already reaches). NULL on the rows written before this migration: the timeline says "unknown" for them.
-- actor_ref: the API key id of an Integration's request (its name is read from api_keys when shown), the provider
-- of a provider's event; NULL otherwise.
ALTER TABLE change_events
  ADD COLUMN actor_type text CHECK (actor_type IN ('integration', 'operator', 'provider', 'service')),
  ADD COLUMN actor_ref text;

-- The revisions of one resource in feed order (the timeline's revision entries).
CREATE INDEX change_events_resource ON change_events (client_code, resource_type, resource_id, seq);

-- Holds placed and released, by Receivable whether released or not (the existing indexes cover only held rows).
CREATE INDEX book_omissions_receivable ON book_omissions (client_code, external_receivable_id, flagged_at);
CREATE INDEX reconciliation_holds_receivable ON reconciliation_holds (client_code, external_receivable_id, held_at);
