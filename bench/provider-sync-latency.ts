import { readRequest, startCheckout, startStripeTest, stripePayable } from '../test/helpers/stripe.ts'

// Lost event to confirmed Payment: the sweep's own duration (sync now), and with the worker at LATENCY_INTERVAL_SECONDS
// (default 5; 300 is PROVIDER_SYNC_INTERVAL_SECONDS's default), LATENCY_SAMPLES lost events (default 6), one after
// the other, each paid at whatever point of the worker's interval the previous one's confirmation left it.
const INTERVAL = process.env.LATENCY_INTERVAL_SECONDS ?? '5'
const SAMPLES = Number(process.env.LATENCY_SAMPLES ?? 6)
const s = await startStripeTest({ env: { PROVIDER_SYNC_INTERVAL_SECONDS: INTERVAL } })
const durations: number[] = []
for (let i = 0; i < 20; i++) {
  const p = await stripePayable(s, `lat-${i}`)
  s.stripe.completeSession(await startCheckout(s, p), { outcome: 'paid' })
  const t0 = performance.now()
  await s.t.app.providerSync.sync(p.client)
  durations.push(performance.now() - t0)
}
durations.sort((a, b) => a - b)
console.log('sync of one client, one lost event: median ms', durations[10]?.toFixed(1), 'max', durations[19]?.toFixed(1))
const quiet: number[] = []
for (let i = 0; i < 20; i++) {
  const t0 = performance.now()
  await s.t.app.providerSync.sync('lat-0')
  quiet.push(performance.now() - t0)
}
quiet.sort((a, b) => a - b)
console.log('sync with nothing new: median ms', quiet[10]?.toFixed(1))
const worker = s.t.app.workers.find((w) => w.name === 'provider-sync')
if (!worker) throw new Error('no worker')
const waits: number[] = []
worker.start()
for (let i = 0; i < SAMPLES; i++) {
  const p = await stripePayable(s, `lat-w-${i}`)
  s.stripe.completeSession(await startCheckout(s, p), { outcome: 'paid' })
  const t0 = performance.now()
  while ((await readRequest(s, p)).status !== 'confirmed') await new Promise((r) => setTimeout(r, 50))
  waits.push(performance.now() - t0)
}
console.log(`worker at ${INTERVAL} s, lost event to confirmed (ms):`, waits.map((w) => w.toFixed(0)).join(', '))
await worker.stop()
await s.close()
