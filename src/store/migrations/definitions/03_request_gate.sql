-- The request gate (src/http/limits.ts): the whole admission of an API-key request in one statement, on the
-- UNLOGGED tables rate_limit_windows and inflight_requests (migration 0012: a crash of PostgreSQL costs at most a
-- minute's counts and frees every slot, which a crash frees anyway).
--
-- A concurrency slot is held one of two ways, which exclude each other:
-- - a row claim (a request that outlives one statement): a row of inflight_requests, held from the gate's statement
--   to its release; it first takes the slot's advisory lock (try, never wait), so it cannot take a slot a
--   one-statement read is using at that moment;
-- - a one-statement read (p_transient, migration 0015): the slot's transaction-scoped advisory lock, taken in the
--   statement that is both its gate and its read and gone when it ends, which writes nothing; it takes the lock
--   first and then checks, in a new snapshot, that no live row holds the slot, so a row claim committed before
--   the lock was taken is seen.
-- Every statement on the two tables names one bucket (its primary key's first column): on Citus both are distributed
-- by `bucket` (docs/scaling.md, "The request gate"), so each is routed to one node.
-- Either way the loser is refused (429), never kept waiting. The lock's key is a 64-bit hash of the bucket and the
-- slot (`slot|<bucket>|<n>`); the identity locks of the write path hash `<client>/<kind>/<id>`.
--
-- CREATE OR REPLACE cannot change an argument list or a result type: drop the old signature first
-- (DROP FUNCTION IF EXISTS name(old argument types)), here, as migration 0015 did for request_gate.

-- One bucket's slot, searched from a random offset (racing requests rarely pick the same one), at most 16 slots
-- from it, five times over when there are more than 16 (with up to 16 slots the answer is exact). Returns the
-- slot taken, or null. Never waits: a slot whose advisory lock is taken is passed over.
CREATE OR REPLACE FUNCTION request_slot(
  p_bucket text, p_concurrency integer, p_now timestamptz, p_reclaim uuid[], p_holder uuid, p_expires timestamptz,
  p_transient boolean)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  got integer;
  start_at integer;
  s integer;
BEGIN
  FOR attempt IN 1 .. CASE WHEN p_concurrency <= 16 THEN 1 ELSE 5 END LOOP
    start_at := CASE WHEN p_concurrency = 1 THEN 0 ELSE floor(random() * p_concurrency)::integer END;
    FOR g IN 0 .. least(p_concurrency, 16) - 1 LOOP
      s := (g + start_at) % p_concurrency;
      -- Not while a one-statement read holds it (nor while another instance's row claim of it is being made).
      CONTINUE WHEN NOT pg_try_advisory_xact_lock(hashtextextended('slot|' || p_bucket || '|' || s, 0));
      IF p_transient THEN
        -- The lock is ours; this new snapshot shows any row claim committed before it was taken.
        IF NOT EXISTS (SELECT 1 FROM inflight_requests i
                        WHERE i.bucket = p_bucket AND i.slot = s AND i.expires_at > p_now
                          AND i.holder <> ALL (p_reclaim)) THEN
          RETURN s;
        END IF;
      ELSE
        -- The primary key makes the claim atomic across instances.
        INSERT INTO inflight_requests AS i (bucket, slot, holder, expires_at) VALUES (p_bucket, s, p_holder, p_expires)
        ON CONFLICT (bucket, slot) DO UPDATE SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at
          WHERE i.expires_at <= p_now OR i.holder = ANY (p_reclaim)
        RETURNING i.slot INTO got;
        IF got IS NOT NULL THEN
          RETURN got;
        END IF;
      END IF;
    END LOOP;
  END LOOP;
  RETURN NULL;
END $$;

-- The gate of one request: the key (joined with its grant for the client in the path), the per-minute count of
-- every bucket, and a concurrency slot in every bucket. Times come from the caller (the service's injected clock):
-- `p_window` is the start of the current minute, `p_now` the lease's start. Returns no row for a key that is
-- unknown, revoked, expired (its expires_at at or before `p_now`) or of another environment (nothing is counted); otherwise one row: the key and grant, `used`
-- (the highest count of the minute, this request included) and `admitted` (false when the count is over
-- `p_per_minute`, or when a bucket has no free slot; then no slot is held). `p_reclaim`: holders of this instance
-- whose request is over but whose release has not reached the store. `p_transient`: true for a one-statement read
-- (p_holder and p_lease_seconds unused), false for a row claim, released later by its holder.
-- A one-statement read takes its slots before it counts: its count's row stays locked until its read is done,
-- and a concurrent request of the key, which waits for that row, has then already been refused its slot.
CREATE OR REPLACE FUNCTION request_gate(
  p_digest text, p_environment text, p_client_code text, p_client_bucket boolean,
  p_window timestamptz, p_now timestamptz, p_per_minute integer, p_concurrency integer,
  p_lease_seconds integer, p_holder uuid, p_reclaim uuid[], p_transient boolean)
RETURNS TABLE (
  key_id text, key_integration_id text, grant_status text, grant_scopes text[], grant_ip_allowlist text[],
  grant_recovery_entry_mode text, grant_feed_mode text, grant_industry_profile text, grant_receipt_delivery_owner text,
  used integer, admitted boolean)
LANGUAGE plpgsql AS $$
DECLARE
  k record;
  buckets text[];
  b text;
  d text;
  n integer;
  worst integer := 0;
  slotted boolean := true;
  expires timestamptz := p_now + make_interval(secs => p_lease_seconds);
BEGIN
  SELECT a.api_key_id, a.integration_id, a.environment, g.status, g.scopes, g.ip_allowlist, g.recovery_entry_mode,
         g.feed_mode, g.industry_profile, g.receipt_delivery_owner
    INTO k
    FROM api_keys a
    LEFT JOIN grants g ON g.client_code = p_client_code AND g.integration_id = a.integration_id
   WHERE a.digest = p_digest AND a.revoked_at IS NULL AND (a.expires_at IS NULL OR a.expires_at > p_now);
  IF NOT FOUND OR k.environment <> p_environment THEN
    RETURN;
  END IF;
  key_id := k.api_key_id;
  key_integration_id := k.integration_id;
  grant_status := k.status;
  grant_scopes := k.scopes;
  grant_ip_allowlist := k.ip_allowlist;
  grant_recovery_entry_mode := k.recovery_entry_mode;
  grant_feed_mode := k.feed_mode;
  grant_industry_profile := k.industry_profile;
  grant_receipt_delivery_owner := k.receipt_delivery_owner;

  -- In sandbox the limits hold per client too, only for a client the key is granted (so an unknown client
  -- code cannot grow the tables).
  buckets := ARRAY['key:' || k.api_key_id];
  IF p_client_bucket AND k.status = 'active' THEN
    buckets := buckets || ('client:' || p_client_code);
  END IF;

  IF p_transient THEN
    FOREACH b IN ARRAY buckets LOOP
      IF request_slot(b, p_concurrency, p_now, p_reclaim, NULL, NULL, true) IS NULL THEN
        slotted := false;
        EXIT;
      END IF;
    END LOOP;
  END IF;

  -- Every identified request counts, refused ones included.
  FOREACH b IN ARRAY buckets LOOP
    INSERT INTO rate_limit_windows AS w (bucket, window_start, count) VALUES (b, p_window, 1)
      ON CONFLICT (bucket, window_start) DO UPDATE SET count = w.count + 1
      RETURNING w.count INTO n;
    worst := greatest(worst, n);
  END LOOP;
  used := worst;
  IF worst > p_per_minute THEN
    admitted := false;
    RETURN NEXT;
    RETURN;
  END IF;

  IF NOT p_transient THEN
    FOREACH b IN ARRAY buckets LOOP
      IF request_slot(b, p_concurrency, p_now, p_reclaim, p_holder, expires, false) IS NULL THEN
        -- One bucket per statement (on Citus each bucket's rows are on the node of its hash: docs/scaling.md).
        FOREACH d IN ARRAY buckets LOOP
          DELETE FROM inflight_requests WHERE bucket = d AND holder = p_holder;
        END LOOP;
        slotted := false;
        EXIT;
      END IF;
    END LOOP;
  END IF;
  admitted := slotted;
  RETURN NEXT;
END $$;
