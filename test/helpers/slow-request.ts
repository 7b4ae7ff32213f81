import { type ClientRequest, request } from 'node:http'
import net from 'node:net'
import type { TestApp } from './app.ts'
import { onPostgres } from './store.ts'

/** A PUT whose body is only half sent: it holds its concurrency slot until `finish` is called. */
export async function slowPut(t: TestApp, path: string, key: string, body: string) {
  const server = t.app.app.server
  const port = (server.address() as net.AddressInfo).port
  // The server has received it (its gate starts in the same tick, and on PGlite takes the slot at once).
  const received = new Promise<void>((resolve) => {
    const onRequest = (req: { url?: string }) => {
      if (req.url !== path) return
      server.off('request', onRequest)
      resolve()
    }
    server.on('request', onRequest)
  })
  const socket = net.connect(port, '127.0.0.1')
  await new Promise<void>((resolve) => socket.once('connect', () => resolve()))
  let data = ''
  socket.on('data', (d) => {
    data += d.toString()
  })
  socket.write(
    `PUT ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body.slice(0, 10)}`,
  )
  return {
    received,
    async finish(): Promise<string> {
      socket.write(body.slice(10))
      await new Promise<void>((resolve) => socket.once('close', () => resolve()))
      return data
    },
  }
}

/**
 * Waits (bounded) until the slow request holds its slot, without sending a request of the key (which could
 * take the slot first): on PostgreSQL its row is in the store; on PGlite the slot is taken when the gate starts.
 */
export async function slotTaken(t: TestApp, slow: { received: Promise<void> }, apiKeyId: string): Promise<void> {
  await slow.received
  if (!onPostgres) return new Promise((r) => setImmediate(r))
  for (let i = 0; i < 500; i++) {
    const rows = await t.store.query('SELECT 1 FROM inflight_requests WHERE bucket = $1', [`key:${apiKeyId}`])
    if (rows.length > 0) return
    await new Promise((r) => setTimeout(r, 10))
  }
  throw new Error('the slow request never took its slot')
}

/**
 * A PUT to a service process whose body arrives in two parts: the headers and the body's first 10 bytes at once,
 * the rest at `sendRest()`, so the request is in flight across whatever happens in between (a signal, a stop).
 * `abort(err)` gives up on it: `answer` rejects with `err`.
 */
export function splitPut(url: string, key: string, body: string) {
  let req: ClientRequest | undefined
  const answer = new Promise<{ status: number; body: string }>((resolve, reject) => {
    req = request(url, {
      method: 'PUT',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
    })
    req.on('response', (res) => {
      let text = ''
      res.on('data', (d) => {
        text += d
      })
      res.on('end', () => resolve({ status: res.statusCode as number, body: text }))
    })
    req.on('error', reject)
    req.write(body.slice(0, 10))
  })
  return {
    answer,
    sendRest: () => req?.end(body.slice(10)),
    abort: (err: Error) => req?.destroy(err),
  }
}
