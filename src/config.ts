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

const Flag = z.enum(['0', '1', 'true', 'false']).transform((v) => v === '1' || v === 'true')

export const ConfigSchema = z
  .object({
    HOST: z.string().min(1).default('127.0.0.1'),
    PORT: z.coerce.number().int().min(0).max(65535).default(8080),
    DATABASE_URL: z.string().url().optional(),
    DATA_DIR: z.string().min(1).default('./data'),
    SERVICE_ENVIRONMENT: z.enum(['sandbox', 'production']).default('sandbox'),
    ADMIN_TOKEN: z.string().min(24, 'ADMIN_TOKEN must be at least 24 characters').optional(),
    PUBLIC_BASE_URL: z.string().url().optional(),
    DOCS_URL: z.string().url().optional(),
    RATE_LIMIT_PER_MINUTE: z.coerce.number().int().min(1).default(60),
    CONCURRENCY_PER_KEY: z.coerce.number().int().min(1).default(1),
    WEBHOOK_INTERVAL_MS: z.coerce.number().int().min(100).default(60_000),
    WEBHOOK_RETRY_SCHEDULE: DurationList.default(['1m', '5m', '30m', '2h', '6h', '12h', '24h'].map(parseDuration)),
    WEBHOOK_DEV_ALLOW_LOOPBACK: Flag.default(false),
    LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
    SEED_DEMO: Flag.default(true),
    FRESHNESS_STALE_AFTER_TRANSACTION_SECONDS: z.coerce.number().int().min(1).default(172_800),
    FRESHNESS_STALE_AFTER_SNAPSHOT_SECONDS: z.coerce.number().int().min(1).default(93_600),
    FRESHNESS_SWEEP_MS: z.coerce.number().int().min(100).default(60_000),
    BATCH_CHUNK_SIZE: z.coerce.number().int().min(1).max(100).default(50),
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
  })
  .transform((c) => {
    const publicBaseUrl = (c.PUBLIC_BASE_URL ?? `http://${c.HOST}:${c.PORT}`).replace(/\/$/, '')
    return {
      host: c.HOST,
      port: c.PORT,
      databaseUrl: c.DATABASE_URL,
      dataDir: c.DATA_DIR,
      environment: c.SERVICE_ENVIRONMENT,
      adminToken: c.ADMIN_TOKEN,
      publicBaseUrl,
      docsUrl: (c.DOCS_URL ?? `${publicBaseUrl}/docs`).replace(/\/$/, ''),
      limits: { perMinute: c.RATE_LIMIT_PER_MINUTE, concurrencyPerKey: c.CONCURRENCY_PER_KEY },
      webhooks: {
        intervalMs: c.WEBHOOK_INTERVAL_MS,
        retryScheduleMs: c.WEBHOOK_RETRY_SCHEDULE,
        allowLoopback: c.WEBHOOK_DEV_ALLOW_LOOPBACK,
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
      logLevel: c.LOG_LEVEL,
      seedDemo: c.SEED_DEMO,
    }
  })

export type Config = z.output<typeof ConfigSchema>
export type Environment = Config['environment']

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const parsed = ConfigSchema.safeParse(env)
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join('.')}: ${i.message}`)
    throw new Error(`Invalid configuration:\n${lines.join('\n')}`)
  }
  return parsed.data
}
