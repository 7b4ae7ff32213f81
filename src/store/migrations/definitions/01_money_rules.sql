-- The money rules SQL must compute, each defined once here and once in src/domain/money-rules.ts (the two are
-- checked against each other by test/domain/money-rules.test.ts). LANGUAGE sql, IMMUTABLE and a single expression,
-- so the planner inlines them: a query reads as if the expression were written in place, indexes included
-- (payment_requests_open_expiry serves `payment_request_expired(expires_at, $1)`).
-- Changing an argument list: CREATE OR REPLACE keeps the old signature as another function, so drop it first
-- (DROP FUNCTION IF EXISTS name(old argument types)) in this file.

-- What recovery may still collect on a Receivable: its Source amount less what confirmed Payments took that the
-- Source has not acknowledged, less what the Source acknowledged but has not declared since, never below zero.
DROP FUNCTION IF EXISTS working_amount_minor(bigint, bigint);
CREATE OR REPLACE FUNCTION working_amount_minor(
  source_amount_minor bigint, confirmed_unreconciled_minor bigint, acknowledged_undeclared_minor bigint)
RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT GREATEST(source_amount_minor - confirmed_unreconciled_minor - acknowledged_undeclared_minor, 0)
$$;

-- An open Payment request is expired from its expiresAt on (the instant itself included).
CREATE OR REPLACE FUNCTION payment_request_expired(expires_at timestamptz, as_of timestamptz)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT expires_at <= as_of
$$;
