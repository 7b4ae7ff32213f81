/**
 * The durable-write floor (bench/run.ts, scenario `floor`): node:http with no framework and no API, on the same
 * store layer as the service (src/store, `DATABASE_URL` or the embedded store in `DATA_DIR`). Each PUT parses its
 * JSON body, inserts it as one row in one autocommit statement (prepared) and answers 201 with what was stored.
 * No authentication, validation, limits, transaction, feed or holds: what one durable write per request costs on
 * this machine and store, the ceiling any write route of any service on it can reach. A measurement, not a test.
 * Like the bare baseline (bench/bare-server.ts) it runs as a process of its own, started like the service.
 */
import http from 'node:http'
import { openPglite } from '../src/store/pglite.ts'
import { openPostgres } from '../src/store/postgres.ts'

const store = process.env.DATABASE_URL ? openPostgres(process.env.DATABASE_URL) : await openPglite(process.env.DATA_DIR)
await store.exec('CREATE TABLE IF NOT EXISTS bench_floor (id text PRIMARY KEY, body jsonb NOT NULL, created_at timestamptz NOT NULL)')
const server = http.createServer((req, res) => {
  if (req.url === '/readyz') {
    res.end('ok')
    return
  }
  const chunks: Buffer[] = []
  req.on('data', (chunk: Buffer) => chunks.push(chunk))
  req.on('end', async () => {
    try {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8'))
      const [row] = await store.query<{ body: unknown }>(
        'INSERT INTO bench_floor (id, body, created_at) VALUES ($1, $2::jsonb, now()) RETURNING body',
        [req.url, JSON.stringify(body)],
        { prepared: true },
      )
      res.writeHead(201, { 'content-type': 'application/json; charset=utf-8' })
      res.end(JSON.stringify(row?.body))
    } catch (err) {
      res.writeHead(500, { 'content-type': 'text/plain' })
      res.end((err as Error).message)
    }
  })
})
server.listen(Number(process.env.PORT), process.env.HOST ?? '127.0.0.1')
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.once(signal, () => {
    server.close(() => {
      store.close().then(() => process.exit(0))
    })
    server.closeAllConnections()
  })
}
