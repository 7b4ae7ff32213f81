import { z } from 'zod'
import type { KeyRing } from '../domain/key-ring.ts'
import type { Clock } from '../domain/time.ts'
import { isoNow } from '../domain/time.ts'
import { defineRoute, type RouteDef } from '../http/route.ts'
import { recordAudit } from '../resources/audit/store.ts'
import { inUnitOfWork } from '../resources/unit-of-work.ts'
import { type EncryptedColumns, type RewrapResult, rewrapAll } from '../store/secret-keys.ts'
import type { Store } from '../store/store.ts'
import { EmptyBody } from './schema.ts'

export const SecretRewrapResult = z
  .object({
    rewrapped: z.number().int().min(0).describe('Secrets re-encrypted under the current key (WEBHOOK_SECRET_KEY) by this call.'),
    undecryptable: z
      .number()
      .int()
      .min(0)
      .describe(
        'Secrets no configured key opens, left as they are (a webhook endpoint holding one is disabled `signing_secret_unreadable` at its next delivery). Not 0: a key that encrypted them is missing from WEBHOOK_SECRET_KEY_PREVIOUS.',
      ),
  })
  .meta({ id: 'OperatorSecretRewrap', examples: [{ rewrapped: 12, undecryptable: 0 }] })

export interface SecretRewrapDeps {
  store: Store
  clock: Clock
  keyRing: () => Promise<KeyRing>
  /** Every table that keeps secrets encrypted with the ring (src/app.ts). */
  tables: readonly EncryptedColumns[]
}

/** Re-encrypts every stored secret under the current key; audited as `secrets.rewrapped` (counts and key id only). */
export function createSecretRewrap({ store, clock, keyRing, tables }: SecretRewrapDeps) {
  return {
    async byOperator(): Promise<RewrapResult> {
      const ring = await keyRing()
      const result = await rewrapAll(store, ring, tables)
      await inUnitOfWork(store, ({ tx }) =>
        recordAudit(tx, {
          action: 'secrets.rewrapped',
          clientCode: null,
          targetType: 'key_ring',
          targetId: ring.current.id,
          details: { currentKeyId: ring.current.id, ...result },
          change: { currentKeyId: ring.current.id, ...result },
          occurredAt: isoNow(clock),
        }),
      )
      return result
    },
  }
}

export type SecretRewrap = ReturnType<typeof createSecretRewrap>

/** The operator's rewrap route (docs/operator-api.md), wrapped by `inbound secrets rewrap`. */
export function secretRoutes(rewrap: SecretRewrap): RouteDef[] {
  return [
    defineRoute({
      method: 'POST',
      path: '/admin/v1/secrets/rewrap',
      operationId: 'adminRewrapSecrets',
      summary: 'Re-encrypt every stored secret under the current key',
      description:
        'Every secret kept encrypted at rest (webhook signing secrets, receipt-route secrets, payment-provider keys) that is not under WEBHOOK_SECRET_KEY yet is decrypted with the key that opens it (WEBHOOK_SECRET_KEY_PREVIOUS, or the key a sandbox generated) and encrypted again under WEBHOOK_SECRET_KEY. No instance does this by itself: it is the operator\'s step of a key rotation, once every instance holds the new key (docs/operations.md, "Rotating WEBHOOK_SECRET_KEY"); before a previous key is removed, check `undecryptable` 0 and a second call with `rewrapped` 0. In chunks of 100 rows, safe while other instances run. Audited as `secrets.rewrapped`.',
      tags: ['Operator'],
      auth: { kind: 'admin' },
      body: { schema: EmptyBody, mediaType: 'application/json', optional: true },
      responses: { 200: { schema: SecretRewrapResult, description: 'Done; how many were re-encrypted and how many no key opens' } },
      problems: [],
      public: false,
      handler: async () => ({ status: 200, body: await rewrap.byOperator() }),
    }),
  ]
}
