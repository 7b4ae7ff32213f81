-- Issue 12: the request gate in one round trip, on tables that write no WAL.
--
-- The limit rows are short-lived counters and leases: losing them in a crash of PostgreSQL costs at most one
-- minute's counts and frees every slot, which a crash frees anyway. UNLOGGED spares every request its WAL
-- writes and flushes (an UNLOGGED table is emptied after a crash and not replicated, both acceptable here).
ALTER TABLE rate_limit_windows SET UNLOGGED;
ALTER TABLE inflight_requests SET UNLOGGED;

-- The whole gate of an API-key request in one statement: the key (joined with its grant for the client in the
-- path), the per-minute count of every bucket, and a concurrency slot in every bucket. Times come from the
-- caller (the service's injected clock): `p_window` is the start of the current minute, `p_now` the lease's
-- start. Returns no row for a key that is unknown, revoked or of another environment (nothing is counted);
-- otherwise one row: the key and grant, `used` (the highest count of the minute, this request included) and
-- `admitted` (false when the count is over `p_per_minute`, or when a bucket has no free slot; then no slot is
-- held). `p_reclaim`: holders of this instance whose request is over but whose release has not reached the store.
-- Superseded: the current definitions are in definitions/03_request_gate.sql (re-applied after the migrations).
CREATE FUNCTION request_gate(
  p_digest text, p_environment text, p_client_code text, p_client_bucket boolean,
  p_window timestamptz, p_now timestamptz, p_per_minute integer, p_concurrency integer,
  p_lease_seconds integer, p_holder uuid, p_reclaim uuid[])
RETURNS TABLE (
  key_id text, key_integration_id text, grant_status text, grant_scopes text[], grant_ip_allowlist text[],
  grant_recovery_entry_mode text, grant_feed_mode text, grant_industry_profile text, grant_receipt_delivery_owner text,
  used integer, admitted boolean)
LANGUAGE plpgsql AS $$
DECLARE
  k record;
  buckets text[];
  b text;
  n integer;
  worst integer := 0;
  got integer;
  start_at integer;
  expires timestamptz := p_now + make_interval(secs => p_lease_seconds);
BEGIN
  SELECT a.api_key_id, a.integration_id, a.environment, g.status, g.scopes, g.ip_allowlist, g.recovery_entry_mode,
         g.feed_mode, g.industry_profile, g.receipt_delivery_owner
    INTO k
    FROM api_keys a
    LEFT JOIN grants g ON g.client_code = p_client_code AND g.integration_id = a.integration_id
   WHERE a.digest = p_digest AND a.revoked_at IS NULL;
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

  -- A slot per bucket. Racing requests start their search at random offsets, so they rarely pick the same
  -- slot; a loser of a race gets no row and searches again. A search looks at no more than 16 slots from its
  -- offset (generate_series is materialized: scanning all N would cost O(N) when the limit is raised); with up
  -- to 16 slots the answer is exact. The primary key makes a claim atomic across instances.
  FOREACH b IN ARRAY buckets LOOP
    got := NULL;
    FOR attempt IN 1..5 LOOP
      start_at := CASE WHEN p_concurrency = 1 THEN 0 ELSE floor(random() * p_concurrency)::integer END;
      WITH free AS (
        SELECT (g + start_at) % p_concurrency AS slot FROM generate_series(0, least(p_concurrency, 16) - 1) AS g
         WHERE NOT EXISTS (SELECT 1 FROM inflight_requests i
                            WHERE i.bucket = b AND i.slot = (g + start_at) % p_concurrency AND i.expires_at > p_now
                              AND i.holder <> ALL (p_reclaim))
         LIMIT 1)
      INSERT INTO inflight_requests AS i (bucket, slot, holder, expires_at)
      SELECT b, free.slot, p_holder, expires FROM free
      ON CONFLICT (bucket, slot) DO UPDATE SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at
        WHERE i.expires_at <= p_now OR i.holder = ANY (p_reclaim)
      RETURNING i.slot INTO got;
      EXIT WHEN got IS NOT NULL OR p_concurrency <= 16;
    END LOOP;
    IF got IS NULL THEN
      DELETE FROM inflight_requests WHERE bucket = ANY (buckets) AND holder = p_holder;
      admitted := false;
      RETURN NEXT;
      RETURN;
    END IF;
  END LOOP;
  admitted := true;
  RETURN NEXT;
END $$;
