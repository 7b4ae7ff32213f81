-- Leases tied to their holder's session (src/store/lease-holder.ts): the key of the instance that took the lease,
-- whose advisory lock (LEASE_LOCK_CLASS, key) it holds while alive. A lease whose holder's lock is gone is taken at
-- once; NULL (a lease taken before this migration, or by a store without a holder) only expires.
ALTER TABLE batches ADD COLUMN lease_holder bigint;
ALTER TABLE webhook_deliveries ADD COLUMN lease_holder bigint;
