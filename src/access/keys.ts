import { createHash, randomBytes } from 'node:crypto'
import type { Environment } from '../config.ts'

/** API keys: their shape, how one is made, and the digest that is all the database keeps of it. */

export const API_KEY_PATTERN = /^irk_(sandbox|production)_[A-Za-z0-9]{32,}$/

export function digestSecret(secret: string): string {
  return createHash('sha256').update(secret).digest('hex')
}

const BASE62 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789'

/** Uniform base62 from a CSPRNG (rejection sampling: bytes >= 248 are dropped, so no character is favoured). */
export function randomBase62(length: number): string {
  let out = ''
  while (out.length < length) {
    for (const b of randomBytes(length * 2)) {
      if (b < 248 && out.length < length) out += BASE62[b % 62]
    }
  }
  return out
}

export function newApiKey(environment: Environment): string {
  return `irk_${environment}_${randomBase62(40)}`
}
