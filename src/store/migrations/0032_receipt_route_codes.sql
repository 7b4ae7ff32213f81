-- Issue 33, items 1 and 3 (docs/decisions.md, "Receipt route confirmation codes").
--
-- The confirmation code a test receipt carries is random (128 bits), made when the test receipt is sent, and only
-- its SHA-256 digest is kept in `confirmation_digest` (null until a test receipt of the current configuration has
-- been sent). Before this migration the code was derived from the route's signing secret, which the PUT returns,
-- so an unverified route's digest could be matched by anyone holding the secret: those digests are dropped, and
-- the route's current test receipt is due again, so the next one carries a new code.
ALTER TABLE receipt_routes ALTER COLUMN confirmation_digest DROP NOT NULL;
UPDATE receipt_routes SET confirmation_digest = NULL WHERE state = 'unverified';
UPDATE receipt_deliveries d
   SET status = 'pending', next_attempt_at = now(), round_attempts = 0, completed_at = NULL, last_error = NULL,
       lease_token = NULL, lease_expires_at = NULL, lease_holder = NULL
  FROM receipt_routes r
 WHERE d.client_code = r.client_code AND r.state = 'unverified' AND d.kind = 'test' AND d.source_key = r.version::text;

-- Receipts of what happens while a route is unverified are delivered once it is verified: a route's scanned
-- sequence now starts at the feed head when it is first configured and is no longer moved by the verification.
-- A route that never scanned (still 0) starts at the head as it is now, as its verification would have set it.
UPDATE receipt_routes r SET scanned_seq = COALESCE((SELECT h.last_seq FROM feed_heads h WHERE h.client_code = r.client_code), 0)
 WHERE r.scanned_seq = 0 AND r.state <> 'verified';
