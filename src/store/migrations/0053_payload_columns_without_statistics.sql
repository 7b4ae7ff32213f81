-- Payload columns without planner statistics (issue 36; docs/decisions.md, "The batch runner analyzes tables that
-- doubled"). These jsonb columns hold request bodies, representations and audit details: no statement filters, joins
-- or sorts on them, so their statistics never inform a plan, and computing them was most of what an ANALYZE cost (on
-- PGlite, after a drain of 12,000 records of one client: 670 ms for the grown tables, 83 ms without these columns).
-- The runner analyzes tables as they double (src/store/statistics.ts); each of those passes is now that much shorter.
ALTER TABLE batch_records ALTER COLUMN body SET STATISTICS 0;
ALTER TABLE customers ALTER COLUMN representation SET STATISTICS 0;
ALTER TABLE receivables ALTER COLUMN representation SET STATISTICS 0;
ALTER TABLE financial_events ALTER COLUMN body SET STATISTICS 0;
ALTER TABLE payment_observations ALTER COLUMN body SET STATISTICS 0;
ALTER TABLE payment_requests ALTER COLUMN body SET STATISTICS 0;
ALTER TABLE payment_reconciliations ALTER COLUMN body SET STATISTICS 0;
ALTER TABLE balance_snapshots ALTER COLUMN body SET STATISTICS 0;
ALTER TABLE balance_snapshots ALTER COLUMN outcomes SET STATISTICS 0;
ALTER TABLE book_completions ALTER COLUMN body SET STATISTICS 0;
ALTER TABLE refunds ALTER COLUMN body SET STATISTICS 0;
ALTER TABLE audit_events ALTER COLUMN details SET STATISTICS 0;
ALTER TABLE operator_audit_events ALTER COLUMN details SET STATISTICS 0;
ALTER TABLE receipt_deliveries ALTER COLUMN payload SET STATISTICS 0;
