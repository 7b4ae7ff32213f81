import { createHmac, randomBytes } from 'node:crypto'

/**
 * Signing secrets and signatures.
 *
 * - A secret is `whsec_` + 32 random bytes (base64url). It is shown once (PUT that creates, rotate-secret, a PUT
 *   that replaces an unreadable one) and stored only encrypted, with the key ring (src/domain/key-ring.ts,
 *   src/store/secret-keys.ts): AES-256-GCM under the current key, with the endpoint's identity as additional
 *   data (`secretAad`), so a ciphertext copied to another endpoint's row does not decrypt.
 * - A secret that no key of the ring opens disables its endpoint (`signing_secret_unreadable`); rotate-secret and
 *   a PUT then issue a new one without needing the old.
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
