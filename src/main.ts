import pino from 'pino'
import { digestSecret, randomBase62 } from './access/keys.ts'
import { createApp } from './app.ts'
import { type Config, ConfigError, loadConfig } from './config.ts'
import { logOptions } from './http/server.ts'
import { seedDemo } from './seed.ts'
import { DataDirLockedError } from './store/data-dir-lock.ts'
import { DatabaseUnreachableError, databaseLocation, openStore, pendingStore } from './store/open.ts'
import { claimSetting, readSetting } from './store/settings.ts'
import type { Store } from './store/store.ts'
import { startWorkers, stopWorkers } from './workers/worker.ts'

/**
 * The service process: configuration, store and migrations, HTTP, background workers.
 *
 * - Every line it prints is a log line in the service's one format (logOptions: pretty in a terminal, JSON
 *   otherwise); the credentials shown once are printed in the same shape but never through the logger (showOnce).
 * - A start that fails (bad configuration, DATA_DIR in use, port taken) says why in one line and exits 1.
 *   Nothing shown once is stored or printed before the port is bound, so a failed start loses nothing.
 * - PostgreSQL not reachable yet (the service started first: compose, a rollout, a reboot) is waited for, up to
 *   DATABASE_CONNECT_TIMEOUT_SECONDS, with the port already bound: /healthz answers 200, /readyz and every other
 *   route 503, one log line at most every 5 s; migrations run once it answers; exit 1 with one line when the time
 *   is up. SIGTERM during the wait stops at once.
 * - In production nothing secret is generated, so nothing secret is printed: ADMIN_TOKEN is required (config.ts)
 *   and no demo is seeded.
 * - SIGTERM and SIGINT stop it: no new connections, requests in flight answered, batch leases handed back,
 *   webhook deliveries in flight finished and recorded, store closed (which frees DATA_DIR), "stopped" logged,
 *   exit 0 (exit 1 past STOP_DEADLINE_MS). A signal during start stops it once up.
 */
const STOP_DEADLINE_MS = 20_000

const startOptions = logOptions('info')
const log = pino(startOptions, startOptions.stream)

let stopSignal: NodeJS.Signals | null = null
let onStopSignal: ((signal: NodeJS.Signals) => void) | null = null
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  // A terminal's Ctrl-C reaches both npm (which forwards it) and this process: act on the first only.
  process.on(signal, () => {
    if (stopSignal) return
    stopSignal = signal
    onStopSignal?.(signal)
  })
}

function startFailed(message: string, err?: unknown): never {
  log.fatal(err === undefined ? {} : { err }, message)
  process.exit(1)
}

let config: Config
try {
  config = loadConfig()
} catch (err) {
  if (err instanceof ConfigError) startFailed(err.message)
  throw err
}
log.level = config.logLevel

// The embedded store opens before the port is bound (its DATA_DIR lock decides whether this process may run at
// all); PostgreSQL is waited for once the port is bound, behind a store that fails every call until then.
const opening = pendingStore(config.databaseUrl ? 'postgres' : 'pglite')
const store: Store = opening.store
if (!config.databaseUrl) {
  try {
    opening.ready(await openStore({ dataDir: config.dataDir }))
  } catch (err) {
    if (err instanceof DataDirLockedError) startFailed(err.message)
    startFailed(`could not open the embedded store: ${(err as Error).message}`, err)
  }
}

/** The operator token's digest: from ADMIN_TOKEN, or (unset, sandbox only) read or planned once the store answers. */
let adminTokenDigest = config.adminToken ? digestSecret(config.adminToken) : ''
/** Set once the store is reachable, migrated, and the operator token known: routes answer 503 until then. */
let ready = false
const app = createApp({ store, config, adminTokenDigest: () => adminTokenDigest, isReady: () => ready })
try {
  await app.app.listen({ host: config.host, port: config.port })
} catch (err) {
  await app.app.close().catch(() => {})
  await store.close().catch(() => {})
  startFailed(listenFailure(err as NodeJS.ErrnoException, config))
}

if (config.databaseUrl && !opening.isReady()) await reachPostgres(config.databaseUrl)
const adminToken = await planAdminToken(store, config.adminToken)
adminTokenDigest = adminToken.digest
ready = true
// Listening began before the store was known to answer, so the start's check of stored secrets runs now.
await app.checkSecretsAtStart()

// Listening: only now is anything shown once generated into the store.
const shown: string[] = []
if (adminToken.generated) {
  if (!(await claimSetting(store, 'admin_token_digest', adminToken.digest))) {
    log.fatal('another instance generated the operator token at the same moment; start this one again to use it')
    await stop(1)
  }
  shown.push(`Operator token (shown once; set ADMIN_TOKEN to choose your own): ${adminToken.generated}`)
}
if (config.seedDemo && config.environment === 'sandbox') {
  const seeded = await seedDemo(store, app)
  if (seeded) {
    shown.push(`Sandbox demo seeded: client "demo", API key (shown once): ${seeded.apiKey}`)
    shown.push(`Try: curl -H "Authorization: Bearer ${seeded.apiKey}" ${config.publicBaseUrl}/v1/clients/demo/customers/cust-demo-1`)
  }
}

// Every background worker, from the app's one list (src/app.ts `workers`); in sandbox the time workers read each
// client's sandbox clock (src/sandbox/clock.ts).
startWorkers(app.workers)

log.info(
  { url: config.publicBaseUrl, store: store.kind, environment: config.environment },
  `Inbound Receivables Service listening on ${config.publicBaseUrl} (${store.kind} store, ${config.environment}); docs at ${config.publicBaseUrl}/docs`,
)
showOnce(shown)

onStopSignal = (signal) => {
  log.info({ signal }, `${signal}: stopping (finishing requests in flight, handing back batch leases)`)
  void stop(0)
}
if (stopSignal) onStopSignal(stopSignal)

async function stop(code: number): Promise<never> {
  const deadline = setTimeout(() => {
    log.fatal(`did not stop within ${STOP_DEADLINE_MS / 1000} s; exiting anyway`)
    process.exit(1)
  }, STOP_DEADLINE_MS)
  deadline.unref()
  try {
    // No new connections (and 503 on kept-alive ones) while requests in flight are answered; every worker finishes
    // its turn (the batch runner its chunk, handing its lease back; the webhook dispatcher the deliveries it is
    // sending), so that the store is closed under no work.
    await Promise.all([app.app.close(), stopWorkers(app.workers)])
    await store.close()
    log.info('stopped')
  } catch (err) {
    log.fatal({ err }, 'stopping failed')
    code = 1
  }
  process.exit(code)
}

/**
 * Waits for PostgreSQL with the port bound (see the top of this file). SIGTERM or SIGINT meanwhile stops the
 * wait and the process; the time up, or an error waiting cannot cure (a wrong password), fails the start.
 */
async function reachPostgres(url: string): Promise<void> {
  const aborted = new AbortController()
  onStopSignal = (signal) => {
    log.info({ signal }, `${signal}: stopping (still waiting for PostgreSQL)`)
    aborted.abort(new Error('stopped while waiting for PostgreSQL'))
  }
  if (stopSignal) onStopSignal(stopSignal)
  const timeoutSeconds = config.databaseConnectTimeoutSeconds
  try {
    opening.ready(
      await openStore({
        databaseUrl: url,
        wait: {
          timeoutMs: timeoutSeconds * 1000,
          signal: aborted.signal,
          onWaiting: ({ attempt, elapsedMs, error }) =>
            log.warn(
              { attempt, elapsedSeconds: Math.round(elapsedMs / 1000), errMessage: error.message },
              `PostgreSQL at ${databaseLocation(url)} is not reachable yet (${error.message}); waiting up to ${timeoutSeconds} s ` +
                `(DATABASE_CONNECT_TIMEOUT_SECONDS): attempt ${attempt}, ${Math.round(elapsedMs / 1000)} s so far; /readyz answers 503 meanwhile`,
            ),
        },
      }),
    )
  } catch (err) {
    if (aborted.signal.aborted) await stop(0)
    await app.app.close().catch(() => {})
    if (err instanceof DatabaseUnreachableError) startFailed(err.message)
    startFailed(`could not open the PostgreSQL store: ${(err as Error).message}`, err)
  } finally {
    onStopSignal = null
  }
}

/** The operator token's digest; a new token is only planned here and stored once the port is bound. */
async function planAdminToken(db: Store, configured: string | undefined): Promise<{ digest: string; generated?: string }> {
  if (configured) return { digest: digestSecret(configured) }
  const stored = await readSetting(db, 'admin_token_digest')
  if (stored !== undefined) return { digest: stored }
  const generated = `adm_${randomBase62(40)}`
  return { digest: digestSecret(generated), generated }
}

function listenFailure(err: NodeJS.ErrnoException, c: Config): string {
  const where = `${c.host}:${c.port}`
  if (err.code === 'EADDRINUSE') return `cannot listen on ${where}: the port is already in use; stop what uses it or set PORT`
  if (err.code === 'EACCES')
    return `cannot listen on ${where}: permission denied; choose a PORT above 1023 or run with the right to bind it`
  if (err.code === 'EADDRNOTAVAIL') return `cannot listen on ${where}: no such address on this machine; set HOST`
  return `cannot listen on ${where}: ${err.message}`
}

/**
 * Credentials shown once are printed on stdout after the listening line, as docs/design/runtime.md asks ("prints
 * the key and a curl line"), but never through the logger (whose redaction would hide them and whose transports
 * may ship them). In a terminal they are plain lines; otherwise each is one JSON line in the log's shape, marked
 * `"shownOnce": true`, so a JSON log reader still parses every line and a shipper can drop these by that field.
 * Lost anyway? Set ADMIN_TOKEN, and create a new demo key with the CLI (README).
 */
function showOnce(lines: string[]): void {
  if (lines.length === 0) return
  if (process.stdout.isTTY) {
    process.stdout.write(`\n${lines.join('\n')}\n\n`)
    return
  }
  const time = Date.now()
  process.stdout.write(lines.map((msg) => `${JSON.stringify({ level: 30, time, shownOnce: true, msg })}\n`).join(''))
}
