import { resolveAdminToken } from './admin/service.ts'
import { createApp } from './app.ts'
import { loadConfig } from './config.ts'
import { seedDemo } from './seed.ts'
import { openStore } from './store/open.ts'
import { startRetentionWorker } from './workers/retention.ts'

/** The service process: configuration, store and migrations, HTTP, background workers. */
const config = loadConfig()
const store = await openStore({ databaseUrl: config.databaseUrl, dataDir: config.dataDir })
const adminToken = await resolveAdminToken(store, config.adminToken)
const app = createApp({ store, config, adminTokenDigest: adminToken.digest })
const log = app.app.log

// Shown once, on the console, never through the logger.
const out = (line: string) => process.stdout.write(`${line}\n`)
if (adminToken.generated) out(`Operator token (shown once; set ADMIN_TOKEN to choose your own): ${adminToken.generated}`)
if (config.seedDemo && config.environment === 'sandbox') {
  const seeded = await seedDemo(store, app)
  if (seeded) {
    out(`Sandbox demo seeded: client "demo", API key (shown once): ${seeded.apiKey}`)
    out(`Try: curl -H "Authorization: Bearer ${seeded.apiKey}" ${config.publicBaseUrl}/v1/clients/demo/customers/cust-demo-1`)
  }
}

const stopRetention = startRetentionWorker(store, (err) => log.error({ errMessage: (err as Error).message }, 'retention failed'))
// Flips the recorded freshness of Sources that went quiet (hold source_stale), with new revisions.
const sweepTimer = setInterval(() => {
  app.services.freshness.sweep(store).catch((err) => log.error({ errMessage: (err as Error).message }, 'freshness sweep failed'))
}, config.freshness.sweepMs)
sweepTimer.unref()
await app.app.listen({ host: config.host, port: config.port })
app.batchRunner.start()
out(
  `Inbound Receivables Service listening on ${config.publicBaseUrl} (${store.kind} store, ${config.environment}); docs at ${config.publicBaseUrl}/docs`,
)

let stopping = false
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, async () => {
    if (stopping) return
    stopping = true
    stopRetention()
    clearInterval(sweepTimer)
    await app.batchRunner.stop()
    await app.app.close()
    await store.close()
    process.exit(0)
  })
}
