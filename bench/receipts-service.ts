/**
 * The service for `npm run bench:receipts` (bench/receipts.ts): the same app on the same store as src/main.ts,
 * with its receipt dispatcher (the only background worker it runs) held while the bench builds a backlog:
 * SIGHUP stops the dispatcher (the run in progress finishes), SIGUSR2 starts it again. Holding the dispatcher is
 * what a backlog is: confirmed Payments whose receipts have not gone yet (a dispatcher that was behind, or a
 * service that was down). Never a way to run the service.
 */
import { digestSecret } from '../src/access/keys.ts'
import { createApp } from '../src/app.ts'
import { loadConfig } from '../src/config.ts'
import { openStore } from '../src/store/open.ts'

const config = loadConfig()
const store = await openStore({ databaseUrl: config.databaseUrl, dataDir: config.dataDir })
const app = createApp({ store, config, adminTokenDigest: digestSecret(config.adminToken ?? '') })
await app.app.listen({ host: config.host, port: config.port })
const dispatcher = app.receiptDispatcher
dispatcher.start()
process.on('SIGHUP', () => void dispatcher.stop())
process.on('SIGUSR2', () => dispatcher.start())
const stop = async () => {
  await dispatcher.stop()
  await app.app.close()
  await store.close()
  process.exit(0)
}
process.once('SIGTERM', () => void stop())
process.once('SIGINT', () => void stop())
