import { createCipheriv, createDecipheriv, createHmac, randomBytes } from 'node:crypto'

/**
 * The key ring: how every secret the service keeps at rest is encrypted (webhook signing secrets today;
 * payment-provider keys and receipt-route secrets use the same ring when they are stored).
 *
 * - A ring is the current key and any number of previous keys (each 32 bytes, AES-256-GCM). `encrypt` always
 *   uses the current key; `decrypt` opens a ciphertext made under any key of the ring. So the key can change
 *   without any secret going unreadable: the old key stays in the ring (as a previous key) until every
 *   ciphertext has been re-encrypted under the new one (`needsRewrap`, `rewrap`).
 * - Additional data (`aad`) binds a ciphertext to what it belongs to (for a webhook secret, the endpoint's
 *   identity): a ciphertext copied to another row does not open there.
 * - Format `v2.<key id>.<iv>.<tag>.<ciphertext>` (base64url parts): the key id (16 hex digits, an HMAC of the
 *   key, never the key) says which key to use, and whether the ciphertext is under the current key. The
 *   format before the ring, `v1.<iv>.<tag>.<ciphertext>`, carries no key id: it is opened by trying every key,
 *   and always needs a rewrap.
 * - A ciphertext that no key of the ring opens (a key that was dropped, a changed key with no previous one,
 *   a damaged value) throws `UnreadableSecretError`; callers decide what that means for their resource (a
 *   webhook endpoint is disabled with `signing_secret_unreadable`). It never carries the plaintext or a key.
 */
export interface RingKey {
  readonly id: string
  readonly key: Buffer
}

export class UnreadableSecretError extends Error {
  constructor(readonly reason: 'no_key' | 'unknown_format') {
    super(
      reason === 'no_key'
        ? 'no configured key opens this secret (the key it was encrypted under is not in the key ring)'
        : 'the stored secret is in no known ciphertext format',
    )
    this.name = 'UnreadableSecretError'
  }
}

export interface KeyRing {
  readonly current: RingKey
  /** Current first, then the previous keys in the order given; no key twice. */
  readonly keys: readonly RingKey[]
  encrypt(aad: string, plaintext: string): string
  /** The plaintext, or UnreadableSecretError. */
  decrypt(aad: string, stored: string): string
  /** True unless the ciphertext is already in the current format under the current key. */
  needsRewrap(stored: string): boolean
  /** The ciphertext under the current key (null when it already is); UnreadableSecretError when no key opens it. */
  rewrap(aad: string, stored: string): string | null
}

export const KEY_BYTES = 32

/** A key's id: the first 8 bytes of HMAC-SHA256(key, a fixed label), hex. Names the key without revealing it. */
export function keyId(key: Buffer): string {
  return createHmac('sha256', key).update('inbound-receivables/key-ring/key-id').digest().subarray(0, 8).toString('hex')
}

function ringKey(key: Buffer): RingKey {
  if (key.length !== KEY_BYTES) throw new Error(`a key-ring key is ${KEY_BYTES} bytes`)
  return { id: keyId(key), key }
}

function open(key: Buffer, aad: string, iv: string, tag: string, ct: string): string | undefined {
  try {
    const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64url'))
    decipher.setAAD(Buffer.from(aad))
    decipher.setAuthTag(Buffer.from(tag, 'base64url'))
    return Buffer.concat([decipher.update(Buffer.from(ct, 'base64url')), decipher.final()]).toString('utf8')
  } catch {
    return undefined
  }
}

export function createKeyRing(current: Buffer, previous: readonly Buffer[] = []): KeyRing {
  const keys: RingKey[] = []
  for (const k of [current, ...previous]) {
    const rk = ringKey(k)
    if (!keys.some((x) => x.id === rk.id)) keys.push(rk)
  }
  const cur = keys[0] as RingKey
  const currentPrefix = `v2.${cur.id}.`

  function encrypt(aad: string, plaintext: string): string {
    const iv = randomBytes(12)
    const cipher = createCipheriv('aes-256-gcm', cur.key, iv)
    cipher.setAAD(Buffer.from(aad))
    const ct = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()])
    return `v2.${cur.id}.${iv.toString('base64url')}.${cipher.getAuthTag().toString('base64url')}.${ct.toString('base64url')}`
  }

  function decrypt(aad: string, stored: string): string {
    const parts = stored.split('.')
    if (parts[0] === 'v2' && parts.length === 5) {
      const [, id, iv, tag, ct] = parts as [string, string, string, string, string]
      const k = keys.find((x) => x.id === id)
      const plain = k && open(k.key, aad, iv, tag, ct)
      if (plain === undefined) throw new UnreadableSecretError('no_key')
      return plain
    }
    if (parts[0] === 'v1' && parts.length === 4) {
      const [, iv, tag, ct] = parts as [string, string, string, string]
      for (const k of keys) {
        const plain = open(k.key, aad, iv, tag, ct)
        if (plain !== undefined) return plain
      }
      throw new UnreadableSecretError('no_key')
    }
    throw new UnreadableSecretError('unknown_format')
  }

  const needsRewrap = (stored: string) => !stored.startsWith(currentPrefix)

  return {
    current: cur,
    keys,
    encrypt,
    decrypt,
    needsRewrap,
    rewrap: (aad, stored) => (needsRewrap(stored) ? encrypt(aad, decrypt(aad, stored)) : null),
  }
}

/** Keys given as 64 hexadecimal digits each (the configuration's form). */
export function keyFromHex(hex: string): Buffer {
  if (!/^[0-9a-fA-F]{64}$/.test(hex)) throw new Error('a key-ring key is 64 hexadecimal digits')
  return Buffer.from(hex, 'hex')
}
