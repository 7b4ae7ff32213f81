-- A client's payment provider (issue 22, docs/design/payment-providers.md): Stripe, configured by the operator
-- (`PUT /admin/v1/clients/{clientCode}/payment-provider`). At most one per client; none means the sandbox provider
-- in sandbox and "no payment provider is configured" in production (src/resources/payments/registry.ts).
CREATE TABLE client_payment_providers (
  client_code text PRIMARY KEY REFERENCES clients (client_code),
  provider text NOT NULL CHECK (provider IN ('stripe')),
  -- The key's mode (sk_test_/rk_test_: test, sk_live_/rk_live_: live); test only in sandbox, live only in production.
  mode text NOT NULL CHECK (mode IN ('test', 'live')),
  -- The secret (or restricted) API key and the webhook signing secret (whsec_), encrypted under the key ring
  -- (src/domain/key-ring.ts), each bound to this client and its column; never stored in clear. The rewrap walks
  -- them (src/resources/payments/provider-config-store.ts, paymentProviderSecretColumns).
  secret_key_ciphertext text NOT NULL,
  webhook_secret_ciphertext text NOT NULL,
  -- What may be shown of the key: its prefix and last four characters (sk_live_...4242).
  secret_key_hint text NOT NULL,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL
);
