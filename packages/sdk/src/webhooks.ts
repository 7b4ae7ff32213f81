import { createHmac, timingSafeEqual } from 'node:crypto'
import type { components } from './generated/schema.ts'

/**
 * A webhook notification body: the change-feed event (generated type) and the client it belongs to. It carries
 * no detail; read the resource with an ordinary GET.
 */
export type WebhookNotification = components['schemas']['ChangeEvent'] & { clientCode: string }

export type WebhookVerificationFailure =
  | 'missing_header'
  | 'malformed_header'
  | 'no_signature'
  | 'signature_mismatch'
  | 'timestamp_outside_tolerance'
  | 'malformed_body'

export class WebhookVerificationError extends Error {
  readonly reason: WebhookVerificationFailure
  constructor(reason: WebhookVerificationFailure, message: string) {
    super(message)
    this.name = 'WebhookVerificationError'
    this.reason = reason
  }
}

export interface VerifyWebhookOptions {
  /** The receiver's clock (default: now). */
  now?: Date | number
}

const HEX_SIGNATURE = /^[0-9a-f]{64}$/

/** `t` and every `v1` of a `Service-Signature` header; other schemes are ignored. */
function parseHeader(header: string): { t: number; v1: string[] } {
  let t: number | undefined
  const v1: string[] = []
  for (const part of header.split(',')) {
    const eq = part.indexOf('=')
    if (eq <= 0) throw new WebhookVerificationError('malformed_header', 'Service-Signature: every item must be key=value')
    const key = part.slice(0, eq).trim()
    const value = part.slice(eq + 1).trim()
    if (key === 't') {
      if (t !== undefined) throw new WebhookVerificationError('malformed_header', 'Service-Signature: more than one t')
      if (!/^\d{1,15}$/.test(value)) throw new WebhookVerificationError('malformed_header', 'Service-Signature: t is not a Unix time')
      t = Number(value)
    } else if (key === 'v1') {
      v1.push(value)
    }
  }
  if (t === undefined) throw new WebhookVerificationError('malformed_header', 'Service-Signature: no t')
  if (v1.length === 0) throw new WebhookVerificationError('no_signature', 'Service-Signature: no v1 signature')
  return { t, v1 }
}

/**
 * Verifies a notification exactly as the specification says, and returns its parsed body:
 *
 * 1. `rawBody` is the body as received, before any parsing (a string, or the bytes).
 * 2. For every secret (several while a rotation overlaps, or while you roll your own configuration), the hex
 *    HMAC-SHA256 over `<t>.<raw body>`, keyed with the whole secret string (`whsec_...`).
 * 3. Each is compared with every `v1` value of the header in constant time; one match is enough.
 * 4. `t` more than `toleranceSeconds` (default 300, the specification's 5 minutes) from the receiver's clock, in
 *    either direction, is refused even with a valid signature.
 *
 * Throws WebhookVerificationError (with a `reason`) on any failure; TypeError for a misuse (no secrets, a
 * negative tolerance). After a successful verification, discard an `eventId` you already handled.
 */
export function verifyWebhook(
  rawBody: string | Uint8Array,
  signatureHeader: string | null | undefined,
  secrets: readonly string[],
  toleranceSeconds = 300,
  options: VerifyWebhookOptions = {},
): WebhookNotification {
  return verifySignedBody('verifyWebhook', rawBody, signatureHeader, secrets, toleranceSeconds, options) as WebhookNotification
}

/**
 * The signature check `verifyWebhook` and `verifyReceipt` share; `caller` names the function a misuse is reported
 * against. Returns the parsed body.
 */
export function verifySignedBody(
  caller: string,
  rawBody: string | Uint8Array,
  signatureHeader: string | null | undefined,
  secrets: readonly string[],
  toleranceSeconds: number,
  options: VerifyWebhookOptions,
): unknown {
  if (typeof rawBody !== 'string' && !(rawBody instanceof Uint8Array)) {
    throw new TypeError(`${caller}: rawBody must be the raw body (string or bytes), not a parsed object`)
  }
  if (!Array.isArray(secrets) || secrets.length === 0 || secrets.some((s) => typeof s !== 'string' || s.length === 0)) {
    throw new TypeError(`${caller}: secrets must be a non-empty array of signing secrets`)
  }
  if (!Number.isFinite(toleranceSeconds) || toleranceSeconds < 0) {
    throw new TypeError(`${caller}: toleranceSeconds must be a non-negative number`)
  }
  if (typeof signatureHeader !== 'string' || signatureHeader.trim() === '') {
    throw new WebhookVerificationError('missing_header', 'no Service-Signature header')
  }
  const { t, v1 } = parseHeader(signatureHeader)
  const body =
    typeof rawBody === 'string' ? Buffer.from(rawBody, 'utf8') : Buffer.from(rawBody.buffer, rawBody.byteOffset, rawBody.byteLength)
  const received = v1.filter((s) => HEX_SIGNATURE.test(s)).map((s) => Buffer.from(s, 'hex'))
  let matched = false
  for (const secret of secrets) {
    const expected = createHmac('sha256', secret).update(`${t}.`).update(body).digest()
    // Every comparison runs (no early exit), each in constant time over 32 bytes.
    for (const candidate of received) if (timingSafeEqual(candidate, expected)) matched = true
  }
  if (!matched) throw new WebhookVerificationError('signature_mismatch', 'no v1 signature matches a signing secret')
  const now = options.now === undefined ? Date.now() : typeof options.now === 'number' ? options.now : options.now.getTime()
  if (Math.abs(Math.floor(now / 1000) - t) > toleranceSeconds) {
    throw new WebhookVerificationError('timestamp_outside_tolerance', `t is more than ${toleranceSeconds} s from this clock`)
  }
  try {
    return JSON.parse(body.toString('utf8')) as unknown
  } catch {
    throw new WebhookVerificationError('malformed_body', 'the signed body is not JSON')
  }
}
