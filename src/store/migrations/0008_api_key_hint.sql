-- The last 4 characters of each newly issued API key, so that an operator can tell a client's keys apart
-- (which one the Source's configuration holds) without the service keeping the key. 4 of the 40 random
-- base62 characters leave about 214 bits unknown; the digest stays the only way to check a key.
-- Keys issued before this migration have no hint (NULL).
ALTER TABLE api_keys ADD COLUMN last4 text CHECK (last4 ~ '^[A-Za-z0-9]{4}$');
