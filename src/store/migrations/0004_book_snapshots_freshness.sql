-- Complete-book declarations and their omissions, balance snapshots, and per-client source activity.

CREATE TABLE book_completions (
  client_code text NOT NULL REFERENCES clients (client_code),
  external_completion_id text NOT NULL,
  body jsonb NOT NULL,
  source_position bigint NOT NULL,
  covered_count integer NOT NULL,
  omitted_count integer NOT NULL,
  accepted_at timestamptz NOT NULL,
  PRIMARY KEY (client_code, external_completion_id)
);
CREATE INDEX book_completions_position ON book_completions (client_code, source_position);

-- A Receivable a declaration found missing from the book: held until the Source writes it again or closes it.
CREATE TABLE book_omissions (
  client_code text NOT NULL,
  external_completion_id text NOT NULL,
  external_receivable_id text NOT NULL,
  flagged_at timestamptz NOT NULL,
  released_at timestamptz,
  PRIMARY KEY (client_code, external_completion_id, external_receivable_id),
  FOREIGN KEY (client_code, external_completion_id) REFERENCES book_completions (client_code, external_completion_id)
);
CREATE INDEX book_omissions_held ON book_omissions (client_code, external_receivable_id) WHERE released_at IS NULL;

CREATE TABLE balance_snapshots (
  client_code text NOT NULL REFERENCES clients (client_code),
  external_snapshot_id text NOT NULL,
  body jsonb NOT NULL,
  feed_mode text NOT NULL,
  source_position bigint NOT NULL,
  outcomes jsonb NOT NULL,
  accepted_at timestamptz NOT NULL,
  PRIMARY KEY (client_code, external_snapshot_id)
);
CREATE INDEX balance_snapshots_position ON balance_snapshots (client_code, source_position);

-- When the Source was last heard from: any accepted Source write, and the last snapshot.
CREATE TABLE source_activity (
  client_code text PRIMARY KEY REFERENCES clients (client_code),
  feed_mode text NOT NULL,
  last_received_at timestamptz,
  last_snapshot_at timestamptz,
  last_source_position bigint
);
