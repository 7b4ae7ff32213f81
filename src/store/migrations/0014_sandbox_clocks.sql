-- Sandbox clocks (docs/decisions.md, "Sandbox clock"): in SERVICE_ENVIRONMENT=sandbox an operator may stop a
-- client's clock at an instant and move it forward (never back). A client without a row runs on real time.
-- The clock lives here, not in a process, so every instance sharing the database reads the same time for the
-- client. Production never writes a row (the routes do not exist there).
CREATE TABLE sandbox_clocks (
  client_code text PRIMARY KEY REFERENCES clients (client_code),
  frozen_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL
);
