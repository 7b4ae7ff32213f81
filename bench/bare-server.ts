/**
 * The bare baseline of `npm run bench` (bench/run.ts): node:http answering every request, GET /readyz included,
 * with the payload in BENCH_BARE_PAYLOAD (the benchmark's Customer JSON) and the service's response headers; no
 * framework, no store, no authentication. It runs as a process of its own, started like the service (bench/service.ts,
 * startService), so that the baseline and the service compete for the machine alike. Until issue 26 it ran inside
 * the load generator's process, which then both sent and answered every baseline request on one core: the baseline
 * was about halved and every ratio to it about twice too flattering. A measurement, not a test.
 */
import http from 'node:http'

/** The bare handler: the payload with the service's response headers (bench/run.ts also runs it in process). */
export function bareHandler(payload: string): http.RequestListener {
  return (_req, res) => {
    res.writeHead(200, {
      'content-type': 'application/json; charset=utf-8',
      'cache-control': 'no-store',
      'service-api-version': 'v1',
      'x-request-id': '00000000-0000-4000-8000-000000000000',
    })
    res.end(payload)
  }
}

// Run as a process (not when bench/run.ts imports the handler).
if (process.argv[1]?.endsWith('bare-server.ts')) {
  const server = http.createServer(bareHandler(process.env.BENCH_BARE_PAYLOAD ?? '{}'))
  server.listen(Number(process.env.PORT), process.env.HOST ?? '127.0.0.1')
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    process.once(signal, () => {
      server.close(() => process.exit(0))
      server.closeAllConnections()
    })
  }
}
