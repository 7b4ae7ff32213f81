import ipaddr from 'ipaddr.js'
import { z } from 'zod'

/**
 * The whole runtime configuration, parsed once at start from the environment.
 * Defaults are the specification's values; no secret has a default.
 */
const DurationList = z
  .string()
  .regex(/^\d+[smhd](,\d+[smhd])*$/, 'comma-separated durations such as 1m,5m,2h')
  .transform((s) => s.split(',').map(parseDuration))

export function parseDuration(text: string): number {
  const unit = text.slice(-1)
  const n = Number(text.slice(0, -1))
  const ms = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }[unit]
  if (ms === undefined || !Number.isSafeInteger(n)) throw new Error(`bad duration ${text}`)
  return n * ms
}

/**
 * The most records one batch chunk transaction may hold. Set-based records (src/workers/batch-waves.ts) take no
 * savepoint of their own: a chunk's set-based writes all run under its one chunk savepoint, one subtransaction id.
 * A record that runs alone (an operation without a set-based form, a `fallback` record, every record of a chunk
 * whose set-based run failed unexpectedly) runs in a savepoint, and every savepoint that writes takes a
 * subtransaction id. PostgreSQL caches at most 64 of them per backend (PGPROC_MAX_CACHED_SUBXIDS); a transaction
 * with more overflows that cache, and from then until it ends every other session's snapshot has to look
 * subtransactions up in pg_subtrans (an SLRU shared by all) instead of in memory: a slowdown for the whole
 * server, not only this chunk. So the runner, not this cap, bounds the savepoints: a chunk runs at most
 * MAX_RECORD_SAVEPOINTS_PER_CHUNK records alone (src/workers/batch-runner.ts) and leaves the rest pending for
 * its next chunk. This cap bounds how long one chunk transaction holds its identity locks: 100 is a whole
 * batch of the benchmark's 100 mixed records (one transaction instead of two; docs/performance.md).
 */
export const MAX_BATCH_CHUNK_SIZE = 100

/**
 * Which proxies' X-Forwarded-For is believed: unset, empty or 0 (the default), none; a whole number, that many
 * hops nearest the service; otherwise a comma-separated list of proxy addresses or CIDR ranges (Fastify's
 * `trustProxy`). "true" (believe any sender) is refused: it would let every client choose its own address.
 */
const TrustProxy = z
  .string()
  .trim()
  .superRefine((v, ctx) => {
    if (v === '' || /^\d+$/.test(v)) return
    for (const entry of v.split(',').map((e) => e.trim())) {
      const valid = entry.includes('/') ? ipaddr.isValidCIDR(entry) : ipaddr.isValid(entry)
      if (!valid) ctx.addIssue({ code: 'custom', message: `"${entry}" is neither a hop count nor an IP address or CIDR range` })
    }
  })
  .transform((v): false | number | string[] => {
    if (v === '' || v === '0') return false
    if (/^\d+$/.test(v)) return Number(v)
    return v.split(',').map((e) => e.trim())
  })

const Flag = z.enum(['0', '1', 'true', 'false']).transform((v) => v === '1' || v === 'true')

/**
 * Where the Stripe SDK sends its calls (a proxy, or a local stand-in in tests): scheme, host and port only, because
 * the SDK adds `/v1/...` itself and would silently drop a path (src/resources/payments/stripe/gateway.ts).
 */
const StripeApiBase = z
  .string()
  .trim()
  .superRefine((v, ctx) => {
    let url: URL
    try {
      url = new URL(v)
    } catch {
      ctx.addIssue({ code: 'custom', message: 'is not a URL' })
      return
    }
    if (url.protocol !== 'https:' && url.protocol !== 'http:') ctx.addIssue({ code: 'custom', message: 'is not an http or https URL' })
    else if (url.pathname !== '/' || url.search !== '' || url.hash !== '' || url.username !== '' || url.password !== '') {
      ctx.addIssue({ code: 'custom', message: 'has a path, query or credentials (only a scheme, host and port are taken)' })
    }
  })
  .transform((v) => new URL(v).origin)

export const ConfigSchema = z
  .object({
    HOST: z.string().min(1).default('127.0.0.1'),
    TRUST_PROXY: TrustProxy.prefault(''),
    PORT: z.coerce.number().int().min(0).max(65535).default(8080),
    DATABASE_URL: z.string().url().optional(),
    DATABASE_CONNECT_TIMEOUT_SECONDS: z.coerce.number().int().min(1).max(3600).default(60),
    DATA_DIR: z.string().min(1).default('./data'),
    SERVICE_ENVIRONMENT: z.enum(['sandbox', 'production']).default('sandbox'),
    ADMIN_TOKEN: z.string().min(24, 'is shorter than 24 characters').optional(),
    PUBLIC_BASE_URL: z.string().url().optional(),
    DOCS_URL: z.string().url().optional(),
    RATE_LIMIT_PER_MINUTE: z.coerce.number().int().min(1).default(60),
    CONCURRENCY_PER_KEY: z.coerce.number().int().min(1).default(1),
    PAY_RATE_LIMIT_PER_MINUTE: z.coerce.number().int().min(1).default(30),
    WEBHOOK_INTERVAL_MS: z.coerce.number().int().min(100).default(60_000),
    WEBHOOK_BACKLOG_LIMIT: z.coerce.number().int().min(100).max(10_000_000).default(10_000),
    WEBHOOK_RETRY_SCHEDULE: DurationList.default(['1m', '5m', '30m', '2h', '6h', '12h', '24h'].map(parseDuration)),
    WEBHOOK_DEV_ALLOW_LOOPBACK: Flag.default(false),
    WEBHOOK_SECRET_KEY: z
      .string()
      .regex(/^[0-9a-fA-F]{64}$/, 'is not 64 hexadecimal digits (a 256-bit key)')
      .optional(),
    // The keys WEBHOOK_SECRET_KEY replaced: secrets still under one of them open, and are re-encrypted (src/domain/key-ring.ts).
    WEBHOOK_SECRET_KEY_PREVIOUS: z
      .string()
      .trim()
      .regex(/^$|^[0-9a-fA-F]{64}(,[0-9a-fA-F]{64})*$/, 'is not a comma-separated list of keys of 64 hexadecimal digits each')
      .transform((v) => (v === '' ? [] : v.split(',')))
      .prefault(''),
    STRIPE_API_BASE: StripeApiBase.prefault('https://api.stripe.com'),
    // The catch-up sweep of every client's provider events (src/workers/provider-sync.ts); 0 turns it off.
    PROVIDER_SYNC_INTERVAL_SECONDS: z.coerce.number().int().min(0).max(86_400).default(300),
    LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
    SEED_DEMO: Flag.default(true),
    FRESHNESS_STALE_AFTER_TRANSACTION_SECONDS: z.coerce.number().int().min(1).default(172_800),
    FRESHNESS_STALE_AFTER_SNAPSHOT_SECONDS: z.coerce.number().int().min(1).default(93_600),
    FRESHNESS_SWEEP_MS: z.coerce.number().int().min(100).default(60_000),
    BATCH_CHUNK_SIZE: z.coerce.number().int().min(1).max(MAX_BATCH_CHUNK_SIZE).default(100),
    BATCH_LEASE_SECONDS: z.coerce.number().int().min(1).max(3600).default(30),
    BATCH_POLL_MS: z.coerce.number().int().min(10).default(500),
    BATCH_WORKER_CONCURRENCY: z.coerce.number().int().min(0).max(16).default(1),
  })
  .superRefine((c, ctx) => {
    if (c.WEBHOOK_DEV_ALLOW_LOOPBACK && c.SERVICE_ENVIRONMENT === 'production') {
      ctx.addIssue({
        code: 'custom',
        path: ['WEBHOOK_DEV_ALLOW_LOOPBACK'],
        message: 'is refused when SERVICE_ENVIRONMENT=production',
      })
    }
    // A token generated at first start is printed once on stdout, which in production is a log collector's pipe.
    if (!c.ADMIN_TOKEN && c.SERVICE_ENVIRONMENT === 'production') {
      ctx.addIssue({
        code: 'custom',
        path: ['ADMIN_TOKEN'],
        message: 'is required when SERVICE_ENVIRONMENT=production (a generated token would be printed into the logs)',
      })
    }
    if (!c.WEBHOOK_SECRET_KEY && c.SERVICE_ENVIRONMENT === 'production') {
      ctx.addIssue({
        code: 'custom',
        path: ['WEBHOOK_SECRET_KEY'],
        message: 'is required when SERVICE_ENVIRONMENT=production (it encrypts webhook signing secrets at rest)',
      })
    }
  })
  .transform((c) => {
    const publicBaseUrl = (c.PUBLIC_BASE_URL ?? `http://${c.HOST}:${c.PORT}`).replace(/\/$/, '')
    return {
      host: c.HOST,
      port: c.PORT,
      trustProxy: c.TRUST_PROXY,
      databaseUrl: c.DATABASE_URL,
      databaseConnectTimeoutSeconds: c.DATABASE_CONNECT_TIMEOUT_SECONDS,
      dataDir: c.DATA_DIR,
      environment: c.SERVICE_ENVIRONMENT,
      adminToken: c.ADMIN_TOKEN,
      publicBaseUrl,
      docsUrl: (c.DOCS_URL ?? `${publicBaseUrl}/docs`).replace(/\/$/, ''),
      limits: { perMinute: c.RATE_LIMIT_PER_MINUTE, concurrencyPerKey: c.CONCURRENCY_PER_KEY, payPerMinute: c.PAY_RATE_LIMIT_PER_MINUTE },
      webhooks: {
        intervalMs: c.WEBHOOK_INTERVAL_MS,
        retryScheduleMs: c.WEBHOOK_RETRY_SCHEDULE,
        backlogLimit: c.WEBHOOK_BACKLOG_LIMIT,
        allowLoopback: c.WEBHOOK_DEV_ALLOW_LOOPBACK,
        secretKeyHex: c.WEBHOOK_SECRET_KEY,
        previousSecretKeysHex: c.WEBHOOK_SECRET_KEY_PREVIOUS,
      },
      freshness: {
        transactionSeconds: c.FRESHNESS_STALE_AFTER_TRANSACTION_SECONDS,
        snapshotSeconds: c.FRESHNESS_STALE_AFTER_SNAPSHOT_SECONDS,
        sweepMs: c.FRESHNESS_SWEEP_MS,
      },
      batches: {
        chunkSize: c.BATCH_CHUNK_SIZE,
        leaseSeconds: c.BATCH_LEASE_SECONDS,
        pollMs: c.BATCH_POLL_MS,
        concurrency: c.BATCH_WORKER_CONCURRENCY,
      },
      stripe: { apiBase: c.STRIPE_API_BASE },
      providerSync: { intervalSeconds: c.PROVIDER_SYNC_INTERVAL_SECONDS },
      logLevel: c.LOG_LEVEL,
      seedDemo: c.SEED_DEMO,
    }
  })

export type Config = z.output<typeof ConfigSchema>
export type Environment = Config['environment']

/** How to fix each variable, shown beside the problem when the configuration is refused. */
const FIXES: Record<string, string> = {
  HOST: 'set HOST to the address to listen on, such as 127.0.0.1 (the default) or 0.0.0.0',
  TRUST_PROXY:
    'set TRUST_PROXY to the number of proxies in front of the service (such as 1), or to their addresses or CIDR ranges separated by commas (such as 10.0.0.0/8), or unset it when clients connect directly',
  PORT: 'set PORT to a whole number from 0 to 65535, or unset it for 8080',
  DATABASE_URL: 'set DATABASE_URL to a URL such as postgres://user:password@host:5432/database, or unset it for the embedded store',
  DATABASE_CONNECT_TIMEOUT_SECONDS: 'set DATABASE_CONNECT_TIMEOUT_SECONDS to a whole number of seconds from 1 to 3600, or unset it for 60',
  DATA_DIR: 'set DATA_DIR to a directory path, or unset it for ./data',
  SERVICE_ENVIRONMENT: 'set SERVICE_ENVIRONMENT to sandbox or production',
  ADMIN_TOKEN:
    'set ADMIN_TOKEN to a random string of at least 24 characters (for example the output of `openssl rand -hex 24`); it may be unset only in sandbox, where one is generated at first start and printed once',
  PUBLIC_BASE_URL: 'set PUBLIC_BASE_URL to an absolute URL such as https://receivables.example.com, or unset it',
  DOCS_URL: 'set DOCS_URL to an absolute URL such as https://receivables.example.com/docs, or unset it',
  RATE_LIMIT_PER_MINUTE: 'set RATE_LIMIT_PER_MINUTE to a whole number of at least 1, or unset it for 60',
  PAY_RATE_LIMIT_PER_MINUTE: 'set PAY_RATE_LIMIT_PER_MINUTE to a whole number of at least 1, or unset it for 30',
  CONCURRENCY_PER_KEY: 'set CONCURRENCY_PER_KEY to a whole number of at least 1, or unset it for 1',
  WEBHOOK_INTERVAL_MS: 'set WEBHOOK_INTERVAL_MS to a whole number of milliseconds of at least 100, or unset it for 60000',
  WEBHOOK_BACKLOG_LIMIT:
    'set WEBHOOK_BACKLOG_LIMIT to a whole number of pending notifications per endpoint between 100 and 10000000, or unset it for 10000',
  WEBHOOK_RETRY_SCHEDULE: 'set WEBHOOK_RETRY_SCHEDULE to comma-separated durations such as 1m,5m,30m,2h (units s, m, h, d), or unset it',
  WEBHOOK_DEV_ALLOW_LOOPBACK: 'set WEBHOOK_DEV_ALLOW_LOOPBACK to 0 or 1, and to 1 only outside SERVICE_ENVIRONMENT=production',
  WEBHOOK_SECRET_KEY:
    'set WEBHOOK_SECRET_KEY to 64 hexadecimal digits (for example the output of `openssl rand -hex 32`); it may be unset only in sandbox, where a key is generated and stored',
  WEBHOOK_SECRET_KEY_PREVIOUS:
    'set WEBHOOK_SECRET_KEY_PREVIOUS to the keys WEBHOOK_SECRET_KEY replaced, 64 hexadecimal digits each, separated by commas, or unset it',
  STRIPE_API_BASE:
    'set STRIPE_API_BASE to a scheme, host and optional port such as https://api.stripe.com (the default) or http://127.0.0.1:12111, with no path, or unset it',
  LOG_LEVEL: 'set LOG_LEVEL to one of fatal, error, warn, info, debug, trace, silent',
  SEED_DEMO: 'set SEED_DEMO to 0 or 1',
  FRESHNESS_STALE_AFTER_TRANSACTION_SECONDS: 'set it to a whole number of seconds of at least 1, or unset it for 172800',
  FRESHNESS_STALE_AFTER_SNAPSHOT_SECONDS: 'set it to a whole number of seconds of at least 1, or unset it for 93600',
  FRESHNESS_SWEEP_MS: 'set FRESHNESS_SWEEP_MS to a whole number of milliseconds of at least 100, or unset it for 60000',
  BATCH_CHUNK_SIZE: `set BATCH_CHUNK_SIZE to a whole number from 1 to ${MAX_BATCH_CHUNK_SIZE}, or unset it for 100`,
  BATCH_LEASE_SECONDS: 'set BATCH_LEASE_SECONDS to a whole number from 1 to 3600, or unset it for 30',
  BATCH_POLL_MS: 'set BATCH_POLL_MS to a whole number of milliseconds of at least 10, or unset it for 500',
  BATCH_WORKER_CONCURRENCY: 'set BATCH_WORKER_CONCURRENCY to a whole number from 0 to 16, or unset it for 1',
}

export interface ConfigProblem {
  variable: string
  problem: string
  fix: string
}

/** The environment was refused: every problem with its fix, and never a value (one may be a secret). */
export class ConfigError extends Error {
  constructor(readonly problems: ConfigProblem[]) {
    super(
      `Invalid configuration; the service did not start:\n${problems.map((p) => `  ${p.variable}: ${p.problem}. Fix: ${p.fix}.`).join('\n')}`,
    )
    this.name = 'ConfigError'
  }
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const parsed = ConfigSchema.safeParse(env)
  if (!parsed.success) {
    throw new ConfigError(
      parsed.error.issues.map((i) => {
        const variable = i.path.map(String).join('.')
        return { variable, problem: i.message, fix: FIXES[variable] ?? 'see the Configuration table in README.md' }
      }),
    )
  }
  return parsed.data
}
