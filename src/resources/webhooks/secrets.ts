import { createHmac, randomBytes } from 'node:crypto'
import { type KeyRing, UnreadableSecretError } from '../../domain/key-ring.ts'
import type { Scope } from '../../domain/scopes.ts'
import { FEED_READ_SCOPES } from '../changes/service.ts'
import type { ResourceType } from '../feed/store.ts'

/**
 * Signing secrets and signatures.
 *
 * - A secret is `whsec_` + 32 random bytes (base64url). It is shown once (PUT that creates, rotate-secret, a PUT
 *   that replaces an unreadable one) and stored only encrypted, with the key ring (src/domain/key-ring.ts,
 *   src/store/secret-keys.ts): AES-256-GCM under the current key, with the endpoint's identity as additional
 *   data (`secretAad`), so a ciphertext copied to another endpoint's row does not decrypt.
 * - A secret that no key of an instance's ring opens is left to an instance whose ring opens it (never disabled for
 *   it: src/workers/delivery-engine.ts); rotate-secret and a PUT issue a new one without needing the old.
 * - Signature: `t=<unix seconds>,v1=<hex HMAC-SHA256 over "<t>.<raw body>" keyed with the whole secret
 *   string>`, one `v1` per signing secret (two for 24 hours after a rotation): Stripe's scheme exactly.
 */
export function newSigningSecret(): string {
  return `whsec_${randomBytes(32).toString('base64url')}`
}

/** What AES-GCM binds each endpoint's ciphertexts to. */
export const secretAad = (clientCode: string, integrationId: string) => `webhook/${clientCode}/${integrationId}`

export function sign(secret: string, t: number, rawBody: string): string {
  return createHmac('sha256', secret).update(`${t}.${rawBody}`).digest('hex')
}

/** The Service-Signature header value: the newest secret's v1 first. */
export function signatureHeader(secrets: readonly string[], t: number, rawBody: string): string {
  return [`t=${t}`, ...secrets.map((s) => `v1=${sign(s, t, rawBody)}`)].join(',')
}

/** For 24 hours after a rotation notifications carry a signature with each secret. */
export const ROTATION_OVERLAP_MS = 24 * 3600 * 1000

/** The resource types whose notifications a grant may receive: those whose read scope it holds. */
export function readableTypes(scopes: ReadonlySet<string>): ResourceType[] {
  return (Object.keys(FEED_READ_SCOPES) as ResourceType[]).filter((t) => scopes.has(FEED_READ_SCOPES[t] as Scope))
}

/** The endpoint's current signing secret, or null when no key of the ring opens it. */
export function openSecret(ring: KeyRing, row: { client_code: string; integration_id: string; secret_ciphertext: string }) {
  try {
    return ring.decrypt(secretAad(row.client_code, row.integration_id), row.secret_ciphertext)
  } catch (err) {
    if (err instanceof UnreadableSecretError) return null
    throw err
  }
}
