import http from 'node:http'
import type net from 'node:net'

export interface Received {
  path: string
  headers: http.IncomingHttpHeaders
  rawBody: string
  // biome-ignore lint/suspicious/noExplicitAny: notification bodies are inspected field by field
  json: any
}

/** What the receiver does with one request: answer, or hang (never answer), or trickle a body forever. */
export type Behaviour =
  | { status: number; headers?: Record<string, string>; body?: string | Buffer; delayMs?: number }
  | { hang: true }
  | { trickle: true; status: number }

/**
 * A webhook receiver on 127.0.0.1 (for WEBHOOK_DEV_ALLOW_LOOPBACK=1). Records every request with its raw
 * body; `behave` decides each answer (204 by default). `close` ends hanging and trickling exchanges too.
 */
export async function startReceiver() {
  const received: Received[] = []
  let behave: (r: Received, n: number) => Behaviour = () => ({ status: 204 })
  const sockets = new Set<net.Socket>()
  const timers = new Set<NodeJS.Timeout>()
  const waiters: { pred: () => boolean; resolve: () => void }[] = []
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      const rawBody = Buffer.concat(chunks).toString('utf8')
      let json: unknown
      try {
        json = JSON.parse(rawBody)
      } catch {}
      const r: Received = { path: req.url ?? '', headers: req.headers, rawBody, json }
      received.push(r)
      for (const w of [...waiters]) {
        if (w.pred()) {
          waiters.splice(waiters.indexOf(w), 1)
          w.resolve()
        }
      }
      const b = behave(r, received.length)
      if ('hang' in b) return
      if ('trickle' in b) {
        res.writeHead(b.status, { 'content-type': 'text/plain' })
        const timer = setInterval(() => res.write('x'), 200)
        timers.add(timer)
        res.on('close', () => clearInterval(timer))
        return
      }
      const send = () => {
        res.writeHead(b.status, b.headers ?? {})
        res.end(b.body)
      }
      if (b.delayMs) {
        const timer = setTimeout(send, b.delayMs)
        timers.add(timer)
      } else send()
    })
  })
  server.on('connection', (s) => {
    sockets.add(s)
    s.on('close', () => sockets.delete(s))
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()))
  const { port } = server.address() as net.AddressInfo
  return {
    port,
    url: `http://127.0.0.1:${port}/hooks`,
    received,
    behave(fn: (r: Received, n: number) => Behaviour) {
      behave = fn
    },
    /** Resolves once the predicate holds over what was received (checked on each request). */
    until(pred: () => boolean, timeoutMs = 60_000): Promise<void> {
      if (pred()) return Promise.resolve()
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`receiver: condition not met; got ${received.length} requests`)), timeoutMs)
        waiters.push({
          pred,
          resolve: () => {
            clearTimeout(timer)
            resolve()
          },
        })
      })
    },
    async close() {
      for (const t of timers) clearTimeout(t)
      for (const s of sockets) s.destroy()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}

export type Receiver = Awaited<ReturnType<typeof startReceiver>>
