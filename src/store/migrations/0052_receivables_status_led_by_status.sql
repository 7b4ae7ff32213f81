-- The status index led by status (issue 36; docs/decisions.md, "The status index led by status"). Led by
-- client_code it was the primary key's rival for every lookup by client and identifier: a plan made while the table
-- was small (a foreign-key check's generic plan, kept by its connection until the next ANALYZE) could pick it, and
-- then read every index entry of the client to find one Receivable (170 µs a check at 10,000 Receivables of one
-- client, growing with the book). Led by status, it cannot serve a lookup that names no status, so such a plan has
-- only the primary key; a lookup by client and status (a list filtered by status) uses it as before, both columns
-- being equalities.
DROP INDEX receivables_status;
CREATE INDEX receivables_status ON receivables (status, client_code, external_receivable_id);
