import { timingSafeEqual } from 'node:crypto'
import { API_KEY_PATTERN, digestSecret } from '../access/keys.ts'
import type { Environment } from '../config.ts'
import { Problem } from '../domain/problems.ts'

/** The HTTP edge of access: reading the `Authorization` header; who the key is and what it may do is src/access/. */

export function bearerToken(header: string | undefined): string | null {
  const m = header ? /^Bearer ([^\s]+)$/.exec(header) : null
  return m?.[1] ?? null
}

export function constantTimeEqualHex(a: string, b: string): boolean {
  const ab = Buffer.from(a, 'hex')
  const bb = Buffer.from(b, 'hex')
  return ab.length === bb.length && timingSafeEqual(ab, bb)
}

export const invalidKey = () =>
  new Problem('invalid_api_key', 'The API key is missing, malformed, unknown, revoked or for another environment.')

/** The digest of the Bearer key presented, or 401 unless it has the shape of a key of this environment. */
export function presentedKeyDigest(authorization: string | undefined, environment: Environment): string {
  const token = bearerToken(authorization)
  const m = token ? API_KEY_PATTERN.exec(token) : null
  if (!token || !m || m[1] !== environment) throw invalidKey()
  return digestSecret(token)
}
