import { type ChildProcess, spawn } from 'node:child_process'
import net from 'node:net'
import { Agent, fetch } from 'undici'
import { ADMIN_TOKEN } from './app.ts'

/**
 * Requests to service processes never reuse a connection: a test kills and restarts services (sometimes on a
 * port an earlier one had) and waits long between requests, and a pooled keep-alive socket that the server (or
 * its death) closed meanwhile fails the next request with ECONNRESET (seen on Node 24's fetch).
 */
const noKeepAlive = new Agent({ pipelining: 0 })

/** A free loopback port (bound then released). */
export async function freePort(): Promise<number> {
  const server = net.createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()))
  const { port } = server.address() as net.AddressInfo
  await new Promise<void>((resolve) => server.close(() => resolve()))
  return port
}

export interface ServiceProcess {
  url: string
  child: ChildProcess
  output: () => string
  kill(signal?: NodeJS.Signals): Promise<void>
}

/** The real service (`src/main.ts`) as a child process, ready when /readyz answers. */
export async function startService(env: Record<string, string>): Promise<ServiceProcess> {
  const port = await freePort()
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
    env: { ...process.env, HOST: '127.0.0.1', PORT: String(port), ADMIN_TOKEN, SEED_DEMO: '0', LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let out = ''
  child.stdout?.on('data', (d) => {
    out += d.toString()
  })
  child.stderr?.on('data', (d) => {
    out += d.toString()
  })
  const url = `http://127.0.0.1:${port}`
  // Generous: a loaded CI machine can take well over 15 s to start tsx and the store. A service that is not ready
  // is killed before the error is thrown, since nobody else holds it and its pipes would keep this test file alive.
  const deadline = Date.now() + 90_000
  for (;;) {
    if (child.exitCode !== null) throw new Error(`service exited: ${out}`)
    try {
      const res = await fetch(`${url}/readyz`, { dispatcher: noKeepAlive })
      if (res.ok) break
    } catch {}
    if (Date.now() > deadline) {
      child.kill('SIGKILL')
      throw new Error(`service not ready within 90 s: ${out}`)
    }
    await new Promise((r) => setTimeout(r, 50))
  }
  return {
    url,
    child,
    output: () => out,
    async kill(signal: NodeJS.Signals = 'SIGKILL') {
      if (child.exitCode !== null || child.signalCode !== null) return
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
      child.kill(signal)
      await exited
    },
  }
}

export async function http(url: string, method: string, path: string, opts: { token?: string; body?: unknown } = {}) {
  const res = await fetch(`${url}${path}`, {
    dispatcher: noKeepAlive,
    method,
    headers: {
      ...(opts.token ? { authorization: `Bearer ${opts.token}` } : {}),
      ...(opts.body !== undefined ? { 'content-type': 'application/json' } : {}),
    },
    ...(opts.body !== undefined ? { body: JSON.stringify(opts.body) } : {}),
  })
  const text = await res.text()
  return { status: res.status, json: text ? JSON.parse(text) : undefined }
}

/** Client, integration, grant with every scope, and a key, through the operator API over HTTP. */
export async function seedTenant(url: string, clientCode: string, scopes: string[]): Promise<string> {
  const admin = (method: string, path: string, body: unknown) => http(url, method, path, { token: ADMIN_TOKEN, body })
  await admin('PUT', `/admin/v1/clients/${clientCode}`, { name: clientCode })
  await admin('PUT', `/admin/v1/integrations/int-${clientCode}`, { name: clientCode })
  await admin('PUT', `/admin/v1/integrations/int-${clientCode}/grants/${clientCode}`, { scopes })
  const key = await admin('POST', `/admin/v1/integrations/int-${clientCode}/api-keys`, {})
  return key.json.apiKey
}

export interface SpawnedProcess {
  child: ChildProcess
  /** Everything written to stdout and stderr so far. */
  output(): string
  /** Resolves when the process has exited. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>
  /** Waits until the output matches, or the process exits, or timeoutMs passes (then throws with the output). */
  waitForOutput(pattern: RegExp, timeoutMs?: number): Promise<void>
  /** Waits until GET url/readyz answers 200 (throws if the process exits first or timeoutMs passes). */
  waitReady(url: string, timeoutMs?: number): Promise<void>
  /** SIGKILL if still running, and wait for the exit. */
  kill(): Promise<void>
}

/**
 * Any command as a child process of the test, with the given environment on top of this one's
 * (an `undefined` value removes the variable), its output collected; nothing waited for.
 */
export function spawnProcess(command: string, args: string[], env: Record<string, string | undefined>): SpawnedProcess {
  const merged: Record<string, string> = {}
  for (const [k, v] of Object.entries({ ...process.env, ...env })) if (v !== undefined) merged[k] = v
  const child = spawn(command, args, { env: merged, stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  child.stdout?.on('data', (d) => {
    out += d.toString()
  })
  child.stderr?.on('data', (d) => {
    out += d.toString()
  })
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  )
  let done = false
  void exited.then(() => {
    done = true
  })
  async function until(what: string, probe: () => Promise<boolean>, timeoutMs: number) {
    const deadline = Date.now() + timeoutMs
    for (;;) {
      if (await probe()) return
      if (done) throw new Error(`process exited before ${what}:\n${out}`)
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}:\n${out}`)
      await new Promise((r) => setTimeout(r, 50))
    }
  }
  return {
    child,
    output: () => out,
    exited,
    waitForOutput: (pattern, timeoutMs = 120_000) => until(String(pattern), async () => pattern.test(out), timeoutMs),
    waitReady: (url, timeoutMs = 120_000) =>
      until(
        `${url}/readyz`,
        async () => {
          try {
            return (await fetch(`${url}/readyz`, { dispatcher: noKeepAlive })).ok
          } catch {
            return false
          }
        },
        timeoutMs,
      ),
    async kill() {
      if (!done) child.kill('SIGKILL')
      await exited
    },
  }
}
