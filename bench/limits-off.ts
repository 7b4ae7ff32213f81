/**
 * The service with its limits switched off, for `npm run bench` only: the same app on the same store as
 * src/main.ts, but its gate only looks the API key up (one statement) and admits every request, with no count
 * and no slot. Measured beside the real service in the same run, it shows what the limits cost. Never a way
 * to run the service: there is no configuration that turns the limits off.
 */
import { createApp } from '../src/app.ts'
import { loadConfig } from '../src/config.ts'
import { digestSecret, lookupKey } from '../src/http/auth.ts'
import type { Gate } from '../src/http/limits.ts'
import { openStore } from '../src/store/open.ts'

const config = loadConfig()
const store = await openStore({ databaseUrl: config.databaseUrl, dataDir: config.dataDir })
const unlimited = { allowed: true, limit: config.limits.perMinute, remaining: config.limits.perMinute, resetSeconds: 60 }
const gate: Gate = {
  async enter(req) {
    const caller = await lookupKey(store, req.digest, req.environment, req.clientCode)
    if (!caller) return { caller: null }
    return { caller, rate: unlimited, refused: null, lease: { release: async () => {} } }
  },
}
const app = createApp({ store, config, adminTokenDigest: digestSecret(config.adminToken ?? ''), gate })
await app.app.listen({ host: config.host, port: config.port })
const stop = async () => {
  await app.app.close()
  await store.close()
  process.exit(0)
}
process.once('SIGTERM', () => void stop())
process.once('SIGINT', () => void stop())
