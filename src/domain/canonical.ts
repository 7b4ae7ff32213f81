import { createHash } from 'node:crypto'

/**
 * Canonical JSON: object keys sorted, no insignificant white space, numbers in JavaScript's shortest form.
 * Two bodies are "identical" for retries when their canonical forms are equal, so key order and number
 * formatting (1.0 vs 1) never turn a retry into a conflict.
 */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null'
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`
  const entries = Object.entries(value as Record<string, unknown>)
    .filter(([, v]) => v !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`
}

export function sha256Hex(text: string): string {
  return createHash('sha256').update(text).digest('hex')
}

export function canonicalDigest(value: unknown): string {
  return sha256Hex(canonicalJson(value))
}

export function sameCanonical(a: unknown, b: unknown): boolean {
  return canonicalJson(a) === canonicalJson(b)
}
