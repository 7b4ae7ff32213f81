import { readFileSync } from 'node:fs'
import { text as readStream } from 'node:stream/consumers'
import { parseArgs } from 'node:util'
import { request } from 'undici'

/**
 * `inbound`: the operator API (docs/operator-api.md) for people. Readable output by default, `--json` for
 * the raw response. Exit codes: 0 success, 1 the service refused (its problem printed), 2 usage.
 */
const HELP = `inbound - operate the Inbound Receivables Service

Usage: inbound <command> [options]

Commands:
  client list [PAGING]
  client show <clientCode>
  client put <clientCode> [--name N] [--collection-enabled true|false]
  integration list [PAGING]
  integration show <integrationId>
  integration put <integrationId> --name N
  grant list --integration I | --client C [PAGING]
  grant show <integrationId> <clientCode>
  grant put <integrationId> <clientCode> --scopes a,b [--ip-allowlist cidr,cidr]
            [--recovery-entry-mode M] [--feed-mode M] [--industry-profile P] [--receipt-delivery-owner O]
  grant revoke <integrationId> <clientCode>
  key list <integrationId> [PAGING]          never shows the keys, only their last 4 characters
  key show <apiKeyId>
  key create <integrationId> [--name N] [--expires-at T]
                                             issue an API key (shown once), named N (default
                                             "Unnamed key"), refused from instant T on (default: never)
  key rotate <apiKeyId> --grace-period P [--name N] [--expires-at T]
                                             issue a new key (shown once) for the same integration and
                                             end the old one after P: seconds, or 30m, 12h, 7d (0 at once;
                                             at most 30d); the new key keeps the old one's name
                                             unless --name is given
  key revoke <apiKeyId>
  audit list [--client C] [PAGING]
  customer erase <clientCode> <externalCustomerId>
                                             erase a Customer's personal data everywhere (names, contacts,
                                             free text; amounts and identifiers stay): prints its state
  receivable timeline <clientCode> <externalReceivableId> [PAGING]
                                             everything that happened to a Receivable, oldest first:
                                             when, who (actor) and what
  secrets rewrap                             re-encrypt every stored secret under WEBHOOK_SECRET_KEY
                                             (docs/operations.md, changing the encryption key)
  provider set <clientCode> --secret-key-file F --webhook-secret-file F
                                             configure the client's Stripe account: its secret or
                                             restricted key and its webhook signing secret (whsec_),
                                             each read from a file (- for stdin), never from the command
                                             line; without the option, from STRIPE_SECRET_KEY /
                                             STRIPE_WEBHOOK_SECRET. Test keys in sandbox, live keys in
                                             production. Prints the webhook URL and events for Stripe
  provider show <clientCode>                 the client's payment provider (never its secrets)
  branding show <clientCode>                 the client's branding on the hosted payment page
  branding set <clientCode> [--display-name N] [--accent-color #rrggbb] [--support-email E]
            [--support-phone P] [--support-url https://...] [--locale L]
                                             replace it as a whole (an option left out is removed);
                                             the colour needs 4.5:1 contrast against white
  provider remove <clientCode> [--force]     delete it (sandbox: the sandbox provider again); refused
                                             while checkouts are open or processing at it, unless
                                             --force: then no new payment goes through it and its
                                             events still apply until they settle
  provider sync <clientCode>                 catch up with the provider now: its events after the last
                                             one stored, applied once each; prints eventsRead and
                                             eventsApplied
  receipts show <clientCode>                 the client's receipt route (never its secret), its grant and
                                             capability, its receipts by status (pending: the backlog)
                                             and its latest 20 delivery attempts

Sandbox only (a production service answers 404 route_not_found):
  clock show <clientCode>                    the client's sandbox clock
  clock advance <clientCode> --by D | --to T advance by an ISO 8601 duration (P30D, PT1H30M) or to an
                                             instant (2026-03-01T00:00:00Z); never backwards
  clock reset <clientCode>                   back to real time
  client reset <clientCode> --yes            delete every resource, feed event and batch of the client
                                             (keeps the client, its grants and keys)

Paging (PAGING):
  --limit N    rows per page, 1..200 (default 50)
  --cursor X   the page after X (printed as "more: --cursor X" under a page)
  --all        follow the cursors and print every row

Options:
  --url U      service base URL (env INBOUND_URL, default http://127.0.0.1:8080)
  --token T    operator token (env ADMIN_TOKEN or INBOUND_ADMIN_TOKEN)
  --json       print the raw JSON response (with --all: {"data": [every row], "nextCursor": null})
  -h, --help   this help
  --version    the version of this CLI
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
        version: { type: 'boolean', default: false },
        all: { type: 'boolean', default: false },
        integration: { type: 'string' },
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
        by: { type: 'string' },
        to: { type: 'string' },
        yes: { type: 'boolean', default: false },
        force: { type: 'boolean', default: false },
        'secret-key-file': { type: 'string' },
        'webhook-secret-file': { type: 'string' },
        'expires-at': { type: 'string' },
        'display-name': { type: 'string' },
        'accent-color': { type: 'string' },
        'support-email': { type: 'string' },
        'support-phone': { type: 'string' },
        'support-url': { type: 'string' },
        locale: { type: 'string' },
        'grace-period': { type: 'string' },
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

async function admin(method: 'GET' | 'PUT' | 'POST' | 'DELETE', path: string, body?: unknown): Promise<Record<string, unknown>> {
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
    // With field errors, the detail only repeats the first of them (a refused scope would print the valid ones twice).
    const summary = errors.length > 0 ? `${errors.length} field${errors.length === 1 ? '' : 's'} refused:` : (json.detail ?? text)
    process.stderr.write(`error: ${json.title ?? 'request failed'} (${res.statusCode}): ${summary}\n`)
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
    // An empty allowlist admits any address: "(none)" would read as the opposite.
    const empty = k === 'ipAllowlist' ? 'any address' : '(none)'
    const text = Array.isArray(v) ? v.join(', ') || empty : v === null ? '-' : String(v)
    process.stdout.write(`${k.padEnd(width)}  ${text}\n`)
  }
}

type Row = Record<string, unknown>
type Column = [header: string, cell: (row: Row) => string]

const cell = (v: unknown): string => (v === null || v === undefined ? '-' : Array.isArray(v) ? v.join(',') || '-' : String(v))
const field =
  (name: string): Column[1] =>
  (row) =>
    cell(row[name])

/** A page as a table (header line, one line per row) and, when more follow, how to get the next page. */
function showTable(result: Row, columns: Column[]) {
  if (opts.json) return show(result)
  const rows = (result.data as Row[] | undefined) ?? []
  const table = [columns.map(([h]) => h), ...rows.map((r) => columns.map(([, f]) => f(r)))]
  const widths = columns.map((_, i) => Math.max(...table.map((row) => (row[i] ?? '').length)))
  for (const row of table)
    process.stdout.write(
      `${row
        .map((text, i) => text.padEnd(widths[i] ?? 0))
        .join('  ')
        .trimEnd()}\n`,
    )
  if (rows.length === 0) process.stdout.write('(none)\n')
  if (result.nextCursor) process.stdout.write(`more: --cursor ${result.nextCursor}\n`)
}

const COLUMNS = {
  client: [
    ['clientCode', field('clientCode')],
    ['name', field('name')],
    ['collectionEnabled', field('collectionEnabled')],
    ['createdAt', field('createdAt')],
  ],
  integration: [
    ['integrationId', field('integrationId')],
    ['name', field('name')],
    ['createdAt', field('createdAt')],
  ],
  grant: [
    ['integrationId', field('integrationId')],
    ['clientCode', field('clientCode')],
    ['status', field('status')],
    ['ipAllowlist', (r) => (Array.isArray(r.ipAllowlist) && r.ipAllowlist.length > 0 ? r.ipAllowlist.join(',') : 'any')],
    ['updatedAt', field('updatedAt')],
    ['scopes', field('scopes')],
  ],
  key: [
    ['apiKeyId', field('apiKeyId')],
    ['hint', field('hint')],
    ['status', (r) => (typeof r.status === 'string' ? r.status : r.revokedAt ? 'revoked' : 'active')],
    ['createdAt', field('createdAt')],
    ['expiresAt', field('expiresAt')],
    ['lastUsedAt', field('lastUsedAt')],
    ['revokedAt', field('revokedAt')],
    ['name', field('name')],
  ],
  timeline: [
    ['at', field('at')],
    ['kind', field('kind')],
    [
      'actor',
      (row) => {
        const actor = row.actor as { type: string; name?: string }
        return actor.name ? `${actor.type}: ${actor.name}` : actor.type
      },
    ],
    ['summary', field('summary')],
  ],
  audit: [
    ['occurredAt', field('occurredAt')],
    ['action', field('action')],
    ['clientCode', field('clientCode')],
    ['targetType', field('targetType')],
    ['targetId', field('targetId')],
  ],
} satisfies Record<string, Column[]>

/** GET of a list with the paging options; with --all, every page, as one. */
async function listing(path: string, filters: Record<string, string | undefined> = {}): Promise<Row> {
  const q = new URLSearchParams()
  for (const [k, v] of Object.entries(filters)) if (v !== undefined) q.set(k, v)
  if (opts.limit) q.set('limit', opts.limit)
  if (opts.cursor) q.set('cursor', opts.cursor)
  const get = () => admin('GET', `${path}${q.size ? `?${q}` : ''}`)
  if (!opts.all) return get()
  const data: unknown[] = []
  for (;;) {
    const page = await get()
    data.push(...((page.data as unknown[] | undefined) ?? []))
    if (typeof page.nextCursor !== 'string') return { data, nextCursor: null }
    q.set('cursor', page.nextCursor)
  }
}

const seg = encodeURIComponent

/** `--grace-period`: whole seconds, or a number with a unit (`90s`, `30m`, `12h`, `7d`); the API checks the bounds. */
function gracePeriodSeconds(text: string): number {
  const m = /^(\d{1,9})([smhd]?)$/.exec(text.trim())
  if (!m) throw new UsageError('--grace-period takes seconds, or a number with s, m, h or d (30m, 12h, 7d)')
  const unit = { '': 1, s: 1, m: 60, h: 3600, d: 86400 }[m[2] as '' | 's' | 'm' | 'h' | 'd']
  return Number(m[1]) * unit
}

/**
 * A secret for `provider set`: from the file named by `option` (`-`: stdin), else from the environment variable
 * `env`; never from the command line, where any user of the machine could read it in the process list. Surrounding
 * whitespace (a file's final newline) is dropped.
 */
async function secretFrom(option: 'secret-key-file' | 'webhook-secret-file', env: string): Promise<string> {
  const file = opts[option]
  let value: string | undefined
  if (file === '-') value = await readStream(process.stdin)
  else if (file !== undefined) {
    try {
      value = readFileSync(file, 'utf8')
    } catch (err) {
      throw new UsageError(`--${option}: cannot read ${file} (${(err as NodeJS.ErrnoException).code ?? 'error'})`)
    }
  } else value = process.env[env]
  value = value?.trim()
  if (!value) throw new UsageError(`missing --${option} F (or the environment variable ${env})`)
  return value
}

function version(): string {
  // package.json is two folders up both from src/cli/ and from a compiled dist/cli/.
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }
  return pkg.version
}

/** `receipts show`: the client's receipt route, its grant and capability, and the latest attempts as a table. */
async function showReceiptRoute(clientCode: string): Promise<void> {
  const result = await admin('GET', `/admin/v1/clients/${seg(clientCode)}/receipt-route`)
  if (opts.json) return show(result)
  const { grant, capability, receipts, recentAttempts, ...route } = result as Row & {
    grant: Row
    capability: Row
    receipts: Row
    recentAttempts: Row[]
  }
  show({
    ...route,
    grant: `${String(grant.status)}, receiptDeliveryOwner ${String(grant.receiptDeliveryOwner)}`,
    capability: capability.state === 'enabled' ? 'enabled' : `disabled (${String(capability.disabledReason)})`,
    ...receipts,
  })
  process.stdout.write('\nlatest attempts\n')
  return showTable({ data: recentAttempts }, [
    ['attemptedAt', field('attemptedAt')],
    ['kind', field('kind')],
    ['receiptId', field('receiptId')],
    ['paymentRequest', field('externalPaymentRequestId')],
    ['attempt', field('attempt')],
    ['outcome', field('outcome')],
    ['httpStatus', field('httpStatus')],
    ['errorClass', field('errorClass')],
    ['nextAttemptAt', field('nextAttemptAt')],
  ])
}

async function main(): Promise<void> {
  const [noun, verb, a, b] = positionals
  if (opts.version) {
    process.stdout.write(`inbound ${version()}\n`)
    return
  }
  if (opts.help || !noun) {
    process.stdout.write(HELP)
    return
  }
  switch (`${noun} ${verb ?? ''}`) {
    case 'client list':
      return showTable(await listing('/admin/v1/clients'), COLUMNS.client)
    case 'client show':
      return show(await admin('GET', `/admin/v1/clients/${seg(need(a, 'clientCode'))}`))
    case 'integration list':
      return showTable(await listing('/admin/v1/integrations'), COLUMNS.integration)
    case 'integration show':
      return show(await admin('GET', `/admin/v1/integrations/${seg(need(a, 'integrationId'))}`))
    case 'grant list': {
      if (Boolean(opts.integration) === Boolean(opts.client)) throw new UsageError('grant list takes one of --integration I or --client C')
      const path = opts.integration
        ? `/admin/v1/integrations/${seg(opts.integration)}/grants`
        : `/admin/v1/clients/${seg(need(opts.client, '--client'))}/grants`
      return showTable(await listing(path), COLUMNS.grant)
    }
    case 'grant show':
      return show(await admin('GET', `/admin/v1/integrations/${seg(need(a, 'integrationId'))}/grants/${seg(need(b, 'clientCode'))}`))
    case 'key list':
      return showTable(await listing(`/admin/v1/integrations/${seg(need(a, 'integrationId'))}/api-keys`), COLUMNS.key)
    case 'key show':
      return show(await admin('GET', `/admin/v1/api-keys/${seg(need(a, 'apiKeyId'))}`))
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
      const key = await admin('POST', `/admin/v1/integrations/${need(a, 'integrationId')}/api-keys`, {
        ...(opts.name !== undefined ? { name: opts.name } : {}),
        ...(opts['expires-at'] !== undefined ? { expiresAt: opts['expires-at'] } : {}),
      })
      show(key)
      if (!opts.json) process.stdout.write('\nThe key is shown this once; only its digest is stored.\n')
      return
    }
    case 'key rotate': {
      const { rotated, ...key } = await admin('POST', `/admin/v1/api-keys/${seg(need(a, 'apiKeyId'))}/rotate`, {
        gracePeriodSeconds: gracePeriodSeconds(need(opts['grace-period'], '--grace-period')),
        ...(opts.name !== undefined ? { name: opts.name } : {}),
        ...(opts['expires-at'] !== undefined ? { expiresAt: opts['expires-at'] } : {}),
      })
      if (opts.json) return show({ ...key, rotated })
      show(key)
      const old = rotated as Row
      process.stdout.write(
        `\nThe key is shown this once; only its digest is stored.\nThe old key ${cell(old.apiKeyId)} (${cell(old.hint)}) stops working at ${cell(old.expiresAt)}.\n`,
      )
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
    case 'clock show':
      return show(await admin('GET', `/admin/v1/clients/${seg(need(a, 'clientCode'))}/sandbox-clock`))
    case 'clock advance': {
      if (Boolean(opts.by) === Boolean(opts.to)) throw new UsageError('clock advance takes one of --by DURATION or --to INSTANT')
      return show(
        await admin(
          'POST',
          `/admin/v1/clients/${seg(need(a, 'clientCode'))}/sandbox-clock/advance`,
          opts.by ? { by: opts.by } : { to: opts.to },
        ),
      )
    }
    case 'clock reset':
      return show(await admin('POST', `/admin/v1/clients/${seg(need(a, 'clientCode'))}/sandbox-clock/reset`, {}))
    case 'client reset': {
      const clientCode = need(a, 'clientCode')
      if (!opts.yes) throw new UsageError(`client reset deletes every resource of ${clientCode}: add --yes to confirm`)
      const result = await admin('POST', `/admin/v1/clients/${seg(clientCode)}/sandbox-reset`, {})
      if (opts.json) return show(result)
      const deleted = Object.entries((result.deleted as Record<string, number> | undefined) ?? {})
      process.stdout.write(`client ${clientCode} reset at ${String(result.resetAt)}\n`)
      for (const [table, n] of deleted) process.stdout.write(`  ${table.padEnd(34)} ${n} deleted\n`)
      if (deleted.length === 0) process.stdout.write('  (nothing to delete)\n')
      return
    }
    case 'secrets rewrap': {
      const result = await admin('POST', '/admin/v1/secrets/rewrap', {})
      if (opts.json) return show(result)
      process.stdout.write(
        `${String(result.rewrapped)} re-encrypted under the current key, ${String(result.undecryptable)} undecryptable\n`,
      )
      if (Number(result.undecryptable) > 0)
        process.stdout.write('No configured key opens those: set WEBHOOK_SECRET_KEY_PREVIOUS to the key they were encrypted under.\n')
      return
    }
    case 'provider set': {
      const clientCode = need(a, 'clientCode')
      if (opts['secret-key-file'] === '-' && opts['webhook-secret-file'] === '-')
        throw new UsageError('only one of --secret-key-file and --webhook-secret-file can be - (stdin)')
      const secretKey = await secretFrom('secret-key-file', 'STRIPE_SECRET_KEY')
      const webhookSecret = await secretFrom('webhook-secret-file', 'STRIPE_WEBHOOK_SECRET')
      const result = await admin('PUT', `/admin/v1/clients/${seg(clientCode)}/payment-provider`, {
        provider: 'stripe',
        secretKey,
        webhookSecret,
      })
      show(result)
      if (!opts.json)
        process.stdout.write(
          "\nIn Stripe's dashboard (Developers, Webhooks), the endpoint whose signing secret this is must send to\n" +
            `webhookUrl and select the events listed.\n`,
        )
      return
    }
    case 'branding show':
      return show(await admin('GET', `/admin/v1/clients/${seg(need(a, 'clientCode'))}/branding`))
    case 'branding set': {
      const fields = {
        displayName: opts['display-name'],
        accentColor: opts['accent-color'],
        supportEmail: opts['support-email'],
        supportPhone: opts['support-phone'],
        supportUrl: opts['support-url'],
        locale: opts.locale,
      }
      const body = Object.fromEntries(Object.entries(fields).filter(([, v]) => v !== undefined))
      return show(await admin('PUT', `/admin/v1/clients/${seg(need(a, 'clientCode'))}/branding`, body))
    }
    case 'provider sync':
      return show(await admin('POST', `/admin/v1/clients/${seg(need(a, 'clientCode'))}/payment-provider/sync`, {}))
    case 'provider show':
      return show(await admin('GET', `/admin/v1/clients/${seg(need(a, 'clientCode'))}/payment-provider`))
    case 'provider remove': {
      const clientCode = need(a, 'clientCode')
      await admin('DELETE', `/admin/v1/clients/${seg(clientCode)}/payment-provider${opts.force ? '?force=true' : ''}`)
      if (opts.json) return show({ clientCode, removed: true })
      process.stdout.write(`payment provider of ${clientCode} removed\n`)
      return
    }
    case 'receipts show':
      return showReceiptRoute(need(a, 'clientCode'))
    case 'audit list':
      return showTable(await listing('/admin/v1/audit-events', { clientCode: opts.client }), COLUMNS.audit)
    case 'customer erase':
      return show(
        await admin('POST', `/admin/v1/clients/${seg(need(a, 'clientCode'))}/customers/${seg(need(b, 'externalCustomerId'))}/erasure`),
      )
    case 'receivable timeline': {
      const path = `/admin/v1/clients/${seg(need(a, 'clientCode'))}/receivables/${seg(need(b, 'externalReceivableId'))}/timeline`
      return showTable(await listing(path), COLUMNS.timeline)
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
