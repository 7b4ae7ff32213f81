import { type ChildProcess, spawn } from 'node:child_process'
import net from 'node:net'
import { ADMIN_TOKEN } from './app.ts'

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
  for (let i = 0; i < 300; i++) {
    if (child.exitCode !== null) throw new Error(`service exited: ${out}`)
    try {
      const res = await fetch(`${url}/readyz`)
      if (res.ok) break
    } catch {}
    await new Promise((r) => setTimeout(r, 50))
    if (i === 299) throw new Error(`service not ready: ${out}`)
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
