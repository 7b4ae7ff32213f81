/**
 * The Source's receipt endpoint for `npm run bench:receipts` (bench/receipts.ts), a process of its own like the
 * bench's other servers (started by bench/service.ts startService): node:http, each POST read whole, its
 * `Service-Signature` verified with the SDK's verifyReceipt once the secret is known, then 204. It counts what it
 * received (each receiptId once) and when. Control, on the same port: `GET /readyz`, `POST /control/secret` (the
 * route's signing secret, as the body), `GET /control/stats`. A measurement aid, not a test.
 */
import http from 'node:http'
import { buffer } from 'node:stream/consumers'
import { isTestReceipt, verifyReceipt } from '../packages/sdk/src/index.ts'

let secret: string | null = null
const ids = new Set<string>()
const stats = {
  posts: 0,
  unique: 0,
  badSignatures: 0,
  payments: 0,
  firstAtMs: null as number | null,
  lastAtMs: null as number | null,
  confirmationCode: null as string | null,
  inFlight: 0,
  maxInFlight: 0,
}

const server = http.createServer(async (req, res) => {
  if (req.method === 'GET' && req.url === '/readyz') return res.writeHead(200).end('ok')
  if (req.method === 'GET' && req.url === '/control/stats') {
    return res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(stats))
  }
  stats.inFlight++
  stats.maxInFlight = Math.max(stats.maxInFlight, stats.inFlight)
  try {
    const raw = await buffer(req)
    if (req.method === 'POST' && req.url === '/control/secret') {
      secret = raw.toString('utf8')
      return res.writeHead(204).end()
    }
    stats.posts++
    if (secret === null) return res.writeHead(503).end()
    let receipt: ReturnType<typeof verifyReceipt>
    try {
      receipt = verifyReceipt(raw, req.headers['service-signature'], [secret])
    } catch {
      stats.badSignatures++
      return res.writeHead(400).end()
    }
    if (isTestReceipt(receipt)) stats.confirmationCode = receipt.confirmationCode
    else if (!ids.has(receipt.receiptId)) {
      ids.add(receipt.receiptId)
      stats.unique = ids.size
      if (receipt.kind === 'payment') stats.payments++
      const now = Date.now()
      stats.firstAtMs ??= now
      stats.lastAtMs = now
    }
    res.writeHead(204).end()
  } finally {
    stats.inFlight--
  }
})
server.listen(Number(process.env.PORT), process.env.HOST ?? '127.0.0.1')
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.once(signal, () => {
    server.close(() => process.exit(0))
    server.closeAllConnections()
  })
}
