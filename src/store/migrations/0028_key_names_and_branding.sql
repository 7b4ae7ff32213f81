-- Issue 24, items 5 and 6.
--
-- API keys get a name (1 to 100 characters of display text; keys issued before this migration are named
-- 'Unnamed key'), an optional expiry (a key whose expires_at has passed is refused exactly like a revoked one,
-- by the request gate: definitions/03_request_gate.sql, and src/access/store.ts lookupKey), and the time of
-- their last use, written off the request path at most once a minute per key (src/access/key-usage.ts). The
-- name's default stays, for keys inserted by tools and tests that predate names.
ALTER TABLE api_keys
  ADD COLUMN name text NOT NULL DEFAULT 'Unnamed key' CHECK (char_length(name) BETWEEN 1 AND 100),
  ADD COLUMN expires_at timestamptz,
  ADD COLUMN last_used_at timestamptz;

-- A client's branding for the hosted payment page (display name, accent colour, support contact, locale),
-- validated by the operator API (src/domain/branding.ts); null until the operator sets it.
ALTER TABLE clients ADD COLUMN branding jsonb CHECK (jsonb_typeof(branding) = 'object');
