import { parseArgs } from 'node:util'
import { request } from 'undici'

/**
 * `inbound`: the operator API (design.md section 1) for people. Readable output by default, `--json` for
 * the raw response. Exit codes: 0 success, 1 the service refused (its problem printed), 2 usage.
 */
const HELP = `inbound - operate the Inbound Receivables Service

Usage: inbound <command> [options]

Commands:
  client put <clientCode> [--name N] [--collection-enabled true|false]
  integration put <integrationId> --name N
  key create <integrationId>                 issue an API key (shown once)
  key revoke <apiKeyId>
  grant put <integrationId> <clientCode> --scopes a,b [--ip-allowlist cidr,cidr]
            [--recovery-entry-mode M] [--feed-mode M] [--industry-profile P] [--receipt-delivery-owner O]
  grant revoke <integrationId> <clientCode>
  audit list [--client C] [--limit N] [--cursor X]

Options:
  --url U      service base URL (env INBOUND_URL, default http://127.0.0.1:8080)
  --token T    operator token (env ADMIN_TOKEN or INBOUND_ADMIN_TOKEN)
  --json       print the raw JSON response
  -h, --help   this help
`

class UsageError extends Error {}

const { values: opts, positionals } = (() => {
  try {
    return parseArgs({
      allowPositionals: true,
      options: {
        url: { type: 'string' },
        token: { type: 'string' },
        json: { type: 'boolean', default: false },
        help: { type: 'boolean', short: 'h', default: false },
        name: { type: 'string' },
        'collection-enabled': { type: 'string' },
        scopes: { type: 'string' },
        'ip-allowlist': { type: 'string' },
        'recovery-entry-mode': { type: 'string' },
        'feed-mode': { type: 'string' },
        'industry-profile': { type: 'string' },
        'receipt-delivery-owner': { type: 'string' },
        client: { type: 'string' },
        limit: { type: 'string' },
        cursor: { type: 'string' },
      },
    })
  } catch (err) {
    process.stderr.write(`usage: ${(err as Error).message}\n\n${HELP}`)
    process.exit(2)
  }
})()

const baseUrl = (opts.url ?? process.env.INBOUND_URL ?? 'http://127.0.0.1:8080').replace(/\/$/, '')
const token = opts.token ?? process.env.ADMIN_TOKEN ?? process.env.INBOUND_ADMIN_TOKEN

function need(value: string | undefined, what: string): string {
  if (!value) throw new UsageError(`missing ${what}`)
  return value
}

const list = (v: string | undefined) =>
  v
    ? v
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean)
    : undefined

async function admin(method: 'GET' | 'PUT' | 'POST', path: string, body?: unknown): Promise<Record<string, unknown>> {
  if (!token) throw new UsageError('no operator token: pass --token or set ADMIN_TOKEN')
  const res = await request(`${baseUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  })
  const text = await res.body.text()
  const json = text ? (JSON.parse(text) as Record<string, unknown>) : {}
  if (res.statusCode >= 400) {
    const errors = (json.errors as { pointer: string; detail: string }[] | undefined) ?? []
    process.stderr.write(`error: ${json.title ?? 'request failed'} (${res.statusCode}): ${json.detail ?? text}\n`)
    for (const e of errors) process.stderr.write(`  ${e.pointer}: ${e.detail}\n`)
    process.exit(1)
  }
  return json
}

function show(result: Record<string, unknown>) {
  if (opts.json) {
    process.stdout.write(`${JSON.stringify(result, null, 2)}\n`)
    return
  }
  const width = Math.max(...Object.keys(result).map((k) => k.length))
  for (const [k, v] of Object.entries(result)) {
    const text = Array.isArray(v) ? v.join(', ') || '(none)' : v === null ? '-' : String(v)
    process.stdout.write(`${k.padEnd(width)}  ${text}\n`)
  }
}

function showAudit(result: Record<string, unknown>) {
  if (opts.json) return show(result)
  const rows = (result.data as Record<string, string>[]) ?? []
  const cols = ['occurredAt', 'action', 'clientCode', 'targetType', 'targetId'] as const
  const table = [cols.map(String), ...rows.map((r) => cols.map((c) => String(r[c] ?? '-')))]
  const widths = cols.map((_, i) => Math.max(...table.map((row) => (row[i] ?? '').length)))
  for (const row of table)
    process.stdout.write(
      `${row
        .map((cell, i) => cell.padEnd(widths[i] ?? 0))
        .join('  ')
        .trimEnd()}\n`,
    )
  if (result.nextCursor) process.stdout.write(`more: --cursor ${result.nextCursor}\n`)
}

async function main(): Promise<void> {
  const [noun, verb, a, b] = positionals
  if (opts.help || !noun) {
    process.stdout.write(HELP)
    return
  }
  switch (`${noun} ${verb ?? ''}`) {
    case 'client put': {
      const enabled = opts['collection-enabled']
      if (enabled !== undefined && enabled !== 'true' && enabled !== 'false')
        throw new UsageError('--collection-enabled takes true or false')
      return show(
        await admin('PUT', `/admin/v1/clients/${need(a, 'clientCode')}`, {
          ...(opts.name ? { name: opts.name } : {}),
          ...(enabled !== undefined ? { collectionEnabled: enabled === 'true' } : {}),
        }),
      )
    }
    case 'integration put':
      return show(await admin('PUT', `/admin/v1/integrations/${need(a, 'integrationId')}`, { name: need(opts.name, '--name') }))
    case 'key create': {
      const key = await admin('POST', `/admin/v1/integrations/${need(a, 'integrationId')}/api-keys`, {})
      show(key)
      if (!opts.json) process.stdout.write('\nThe key is shown this once; only its digest is stored.\n')
      return
    }
    case 'key revoke':
      return show(await admin('POST', `/admin/v1/api-keys/${need(a, 'apiKeyId')}/revoke`, {}))
    case 'grant put':
      return show(
        await admin('PUT', `/admin/v1/integrations/${need(a, 'integrationId')}/grants/${need(b, 'clientCode')}`, {
          scopes: list(need(opts.scopes, '--scopes')),
          ...(opts['ip-allowlist'] !== undefined ? { ipAllowlist: list(opts['ip-allowlist']) } : {}),
          ...(opts['recovery-entry-mode'] ? { recoveryEntryMode: opts['recovery-entry-mode'] } : {}),
          ...(opts['feed-mode'] ? { feedMode: opts['feed-mode'] } : {}),
          ...(opts['industry-profile'] ? { industryProfile: opts['industry-profile'] } : {}),
          ...(opts['receipt-delivery-owner'] ? { receiptDeliveryOwner: opts['receipt-delivery-owner'] } : {}),
        }),
      )
    case 'grant revoke':
      return show(await admin('POST', `/admin/v1/integrations/${need(a, 'integrationId')}/grants/${need(b, 'clientCode')}/revoke`, {}))
    case 'audit list': {
      const q = new URLSearchParams()
      if (opts.client) q.set('clientCode', opts.client)
      if (opts.limit) q.set('limit', opts.limit)
      if (opts.cursor) q.set('cursor', opts.cursor)
      return showAudit(await admin('GET', `/admin/v1/audit-events${q.size ? `?${q}` : ''}`))
    }
    default:
      throw new UsageError(`unknown command: ${positionals.join(' ')}`)
  }
}

try {
  await main()
} catch (err) {
  if (err instanceof UsageError) {
    process.stderr.write(`usage: ${err.message}\n\n${HELP}`)
    process.exit(2)
  }
  process.stderr.write(`error: ${(err as Error).message}\n`)
  process.exit(1)
}
