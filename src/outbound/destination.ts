import { lookup } from 'node:dns/promises'
import net from 'node:net'
import ipaddr from 'ipaddr.js'
import { Agent } from 'undici'
import { Problem } from '../domain/problems.ts'

/**
 * Webhook destinations, safe against SSRF (the anchors: Stripe's smokescreen, Svix's egress filtering).
 *
 * - The URL itself: `https`, port 443, a public DNS name (never an IP literal in any spelling: the WHATWG
 *   parser turns decimal, octal, hex and short IPv4 forms into a dotted quad, which is refused like any
 *   other literal), no credentials, no fragment, no special-use name (localhost, .internal, .local, ...).
 * - The name must resolve, and every address it resolves to must be public: ipaddr.js classifies each one,
 *   and anything but its `unicast` range (loopback, private, link-local, CGNAT, multicast, reserved,
 *   documentation, unique-local, NAT64, 6to4, Teredo, ...) is refused; an IPv4-mapped IPv6 address is judged
 *   as the IPv4 address it carries.
 * - The connection goes to the address that was checked: `pinnedAgent` hands undici a `lookup` that answers
 *   only that address, so no second resolution can happen between the check and the connect (DNS
 *   rebinding). TLS still verifies the certificate against the host name (undici sets `servername`).
 * - `WEBHOOK_DEV_ALLOW_LOOPBACK=1` also accepts exactly `http://127.0.0.1:<port>` and
 *   `http://localhost:<port>` (pinned to 127.0.0.1, never resolved); every other rule stays on.
 */
export interface ResolvedAddress {
  address: string
  family: 4 | 6
}

/** Every address a name resolves to. Injected, so that tests can answer anything (rebinding included). */
export type Resolver = (hostname: string) => Promise<ResolvedAddress[]>

export const systemResolver: Resolver = async (hostname) =>
  (await lookup(hostname, { all: true, verbatim: true })).map((a) => ({ address: a.address, family: a.family === 6 ? 6 : 4 }))

/** The destination fails a check; `reason` is safe to show its owner (it never repeats the URL). */
export class UnsafeDestinationError extends Error {
  override readonly name = 'UnsafeDestinationError'
  constructor(readonly reason: string) {
    super(`webhook destination unsafe: ${reason}`)
  }
}

/** The name did not resolve (which may pass): not proof that the destination is unsafe. */
export class ResolutionError extends Error {
  override readonly name = 'ResolutionError'
}

export interface Destination {
  url: URL
  hostname: string
  loopback: boolean
}

const MAX_URL_LENGTH = 2048

/** Names reserved for special use (RFC 6761, 6762, 8375, 9476 and common private suffixes): never public. */
const SPECIAL_USE = [
  'localhost',
  'local',
  'localdomain',
  'internal',
  'intranet',
  'lan',
  'home',
  'corp',
  'private',
  'test',
  'example',
  'invalid',
  'onion',
  'alt',
  'arpa',
]

const LABEL = /^(?!-)[a-z0-9-]{1,63}(?<!-)$/

/** The loopback destinations WEBHOOK_DEV_ALLOW_LOOPBACK=1 accepts: `http://127.0.0.1:<port>`, `http://localhost:<port>`. */
const LOOPBACK_HTTP = /^http:\/\/(127\.0\.0\.1|localhost):[1-9]\d{0,4}(?=[/?]|$)/i

/** The checks that need no network. Throws UnsafeDestinationError with the first rule the URL breaks. */
export function parseDestination(raw: string, opts: { allowLoopback: boolean }): Destination {
  const unsafe = (reason: string) => new UnsafeDestinationError(reason)
  if (raw.length > MAX_URL_LENGTH) throw unsafe(`is longer than ${MAX_URL_LENGTH} characters`)
  // The WHATWG parser silently drops tabs, newlines and edge spaces and reads "\" as "/": refuse them instead.
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what this refuses
  if (/[\u0000-\u0020\u007f-\u009f\\]/.test(raw)) throw unsafe('contains white space, a control character or a backslash')
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    throw unsafe('is not an absolute URL')
  }
  if (raw.includes('#')) throw unsafe('has a fragment')
  if (/^[a-z][a-z0-9+.-]*:\/\/[^/?#]*@/i.test(raw) || url.username !== '' || url.password !== '') throw unsafe('carries credentials')
  if (opts.allowLoopback && url.protocol === 'http:' && LOOPBACK_HTTP.test(raw)) {
    return { url, hostname: url.hostname, loopback: true }
  }
  if (url.protocol !== 'https:') {
    if (!opts.allowLoopback && LOOPBACK_HTTP.test(raw))
      throw unsafe('is not https (a loopback http URL is accepted in sandbox when the service runs with WEBHOOK_DEV_ALLOW_LOOPBACK=1)')
    throw unsafe('is not https')
  }
  if (url.port !== '') throw unsafe('is not on port 443')
  const host = url.hostname
  if (host.startsWith('[') || net.isIP(host) !== 0 || ipaddr.isValid(host)) throw unsafe('names an IP address instead of a DNS name')
  if (host.endsWith('.')) throw unsafe('ends with a dot; send the name without it')
  const labels = host.split('.')
  if (labels.length < 2 || host.length > 253 || !labels.every((l) => LABEL.test(l))) throw unsafe('is not a public DNS name')
  const tld = labels.at(-1) as string
  // A numeric or hex-looking last label is how the WHATWG parser recognises an IPv4 literal.
  if (/^(\d+|0x[0-9a-f]*)$/i.test(tld)) throw unsafe('names an IP address instead of a DNS name')
  if (SPECIAL_USE.includes(tld) || host === 'home.arpa' || host.endsWith('.home.arpa'))
    throw unsafe('is a special-use name, not a public one')
  return { url, hostname: host, loopback: false }
}

/** True for an address in ipaddr.js's `unicast` range only (an IPv4-mapped address is judged as its IPv4). */
export function isPublicAddress(address: string): boolean {
  if (!ipaddr.isValid(address)) return false
  const parsed = ipaddr.parse(address)
  if (parsed.kind() === 'ipv6') {
    const v6 = parsed as ipaddr.IPv6
    if (v6.isIPv4MappedAddress()) return v6.toIPv4Address().range() === 'unicast'
    return v6.range() === 'unicast'
  }
  // Only the four-part dotted form is an address a resolver answers; anything else is not trusted.
  return ipaddr.IPv4.isValidFourPartDecimal(address) && parsed.range() === 'unicast'
}

/**
 * Resolves the destination's name and checks every address. Returns the address to connect to.
 * Throws UnsafeDestinationError when any address is not public, ResolutionError when nothing resolved.
 */
export async function resolveDestination(dest: Destination, resolver: Resolver): Promise<ResolvedAddress> {
  if (dest.loopback) return { address: '127.0.0.1', family: 4 }
  let answers: ResolvedAddress[]
  try {
    answers = await resolver(dest.hostname)
  } catch (err) {
    throw new ResolutionError(`the name did not resolve (${(err as NodeJS.ErrnoException).code ?? 'error'})`)
  }
  if (answers.length === 0) throw new ResolutionError('the name resolved to no address')
  const bad = answers.find((a) => !isPublicAddress(a.address))
  if (bad) throw new UnsafeDestinationError('resolves to a non-public address')
  return answers[0] as ResolvedAddress
}

/** Parse, resolve and check in one step (configuration time): any failure is unsafe, including no answer. */
export async function checkDestination(raw: string, opts: { allowLoopback: boolean; resolver: Resolver }): Promise<Destination> {
  const dest = parseDestination(raw, opts)
  try {
    await resolveDestination(dest, opts.resolver)
  } catch (err) {
    if (err instanceof ResolutionError) throw new UnsafeDestinationError(`does not resolve to a public address: ${err.message}`)
    throw err
  }
  return dest
}

/**
 * A destination an integrator configures (a webhook endpoint, a receipt route), checked before the write's
 * transaction opens: an unsafe one is the 422 `webhook_destination_unsafe` at `pointer`, with the reason.
 */
export async function checkConfiguredDestination(
  raw: string,
  opts: { allowLoopback: boolean; resolver: Resolver },
  pointer = '/url',
): Promise<Destination> {
  try {
    return await checkDestination(raw, opts)
  } catch (err) {
    if (err instanceof UnsafeDestinationError) {
      throw new Problem('webhook_destination_unsafe', `The url ${err.reason}.`, {
        errors: [{ code: 'webhook_destination_unsafe', detail: err.reason, pointer }],
      })
    }
    throw err
  }
}

export const ATTEMPT_TIMEOUT_MS = 5000

/**
 * An undici Agent that connects only to `pinned`, whatever name the URL carries (TLS still checks the
 * certificate against that name). Bounded: `connections` sockets, every phase under the attempt timeout,
 * response bodies capped.
 */
export function pinnedAgent(pinned: ResolvedAddress, opts: { connections: number; timeoutMs?: number }): Agent {
  const timeout = opts.timeoutMs ?? ATTEMPT_TIMEOUT_MS
  return new Agent({
    connections: opts.connections,
    pipelining: 1,
    keepAliveTimeout: 10_000,
    headersTimeout: timeout,
    bodyTimeout: timeout,
    maxResponseSize: 64 * 1024,
    connect: {
      timeout,
      lookup: ((_hostname: string, options: { all?: boolean }, callback: (...args: unknown[]) => void) => {
        if (options?.all) callback(null, [{ address: pinned.address, family: pinned.family }])
        else callback(null, pinned.address, pinned.family)
      }) as never,
    },
  })
}
