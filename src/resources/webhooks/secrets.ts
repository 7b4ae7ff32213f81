import { createCipheriv, createDecipheriv, createHmac, randomBytes } from 'node:crypto'
import type { Queryable } from '../../store/store.ts'

/**
 * Signing secrets and signatures.
 *
 * - A secret is `whsec_` + 32 random bytes (base64url). It is shown once (PUT that creates, rotate-secret)
 *   and stored only encrypted: AES-256-GCM under WEBHOOK_SECRET_KEY, with the endpoint's identity as
 *   additional data, so a ciphertext copied to another endpoint's row does not decrypt.
 * - Without WEBHOOK_SECRET_KEY (refused in production by the configuration) a sandbox generates a random
 *   key once and keeps it in the `settings` table, shared by every instance on the store.
 * - Signature: `t=<unix seconds>,v1=<hex HMAC-SHA256 over "<t>.<raw body>" keyed with the whole secret
 *   string>`, one `v1` per signing secret (two for 24 hours after a rotation): Stripe's scheme exactly.
 */
export function newSigningSecret(): string {
  return `whsec_${randomBytes(32).toString('base64url')}`
}

export function encryptSecret(key: Buffer, secret: string, aad: string): string {
  const iv = randomBytes(12)
  const cipher = createCipheriv('aes-256-gcm', key, iv)
  cipher.setAAD(Buffer.from(aad))
  const ct = Buffer.concat([cipher.update(secret, 'utf8'), cipher.final()])
  return `v1.${iv.toString('base64url')}.${cipher.getAuthTag().toString('base64url')}.${ct.toString('base64url')}`
}

export function decryptSecret(key: Buffer, stored: string, aad: string): string {
  const [version, iv, tag, ct] = stored.split('.')
  if (version !== 'v1' || !iv || !tag || ct === undefined) throw new Error('unknown signing secret ciphertext format')
  const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64url'))
  decipher.setAAD(Buffer.from(aad))
  decipher.setAuthTag(Buffer.from(tag, 'base64url'))
  return Buffer.concat([decipher.update(Buffer.from(ct, 'base64url')), decipher.final()]).toString('utf8')
}

export function sign(secret: string, t: number, rawBody: string): string {
  return createHmac('sha256', secret).update(`${t}.${rawBody}`).digest('hex')
}

/** The Service-Signature header value: the newest secret's v1 first. */
export function signatureHeader(secrets: readonly string[], t: number, rawBody: string): string {
  return [`t=${t}`, ...secrets.map((s) => `v1=${sign(s, t, rawBody)}`)].join(',')
}

/** The key that encrypts signing secrets: the configured one, else (sandbox) one generated once and stored. */
export async function loadSecretKey(db: Queryable, configuredHex: string | undefined): Promise<Buffer> {
  if (configuredHex) return Buffer.from(configuredHex, 'hex')
  await db.query(`INSERT INTO settings (key, value) VALUES ('webhook_secret_key', $1) ON CONFLICT (key) DO NOTHING`, [
    randomBytes(32).toString('hex'),
  ])
  const rows = await db.query<{ value: string }>(`SELECT value FROM settings WHERE key = 'webhook_secret_key'`)
  return Buffer.from((rows[0] as { value: string }).value, 'hex')
}
