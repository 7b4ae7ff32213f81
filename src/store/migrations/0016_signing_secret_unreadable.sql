-- A webhook endpoint whose signing secret no configured key opens (src/domain/key-ring.ts) is disabled with
-- `signing_secret_unreadable`, never left with its deliveries silently pending.
ALTER TABLE webhook_endpoints DROP CONSTRAINT webhook_endpoints_disabled_reason_check;
ALTER TABLE webhook_endpoints ADD CONSTRAINT webhook_endpoints_disabled_reason_check
  CHECK (disabled_reason IN ('grant_revoked', 'destination_unsafe', 'signing_secret_unreadable'));
