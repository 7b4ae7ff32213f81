import { type ChildProcess, spawn } from 'node:child_process'
import net from 'node:net'

export const ADMIN_TOKEN = 'bench-operator-token-0123456789abcdef'

export async function freePort(): Promise<number> {
  const server = net.createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()))
  const { port } = server.address() as net.AddressInfo
  await new Promise<void>((resolve) => server.close(() => resolve()))
  return port
}

export interface Service {
  url: string
  stop(): Promise<void>
}

/**
 * The real service as a child process, with the limits raised by configuration; `script` another entry point
 * on the same app (bench/limits-off.ts).
 */
export async function startService(env: Record<string, string>, script = 'src/main.ts'): Promise<Service> {
  const port = await freePort()
  // BENCH_CPU_PROF=<dir>: each service process writes a V8 CPU profile there when it stops (node --cpu-prof).
  const profile = process.env.BENCH_CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_CPU_PROF}`] : []
  const child: ChildProcess = spawn(process.execPath, [...profile, '--import', 'tsx', script], {
    env: {
      ...process.env,
      HOST: '127.0.0.1',
      PORT: String(port),
      ADMIN_TOKEN,
      SEED_DEMO: '0',
      LOG_LEVEL: 'warn',
      RATE_LIMIT_PER_MINUTE: '1000000000',
      CONCURRENCY_PER_KEY: '10000',
      ...env,
    },
    stdio: ['ignore', 'inherit', 'inherit'],
  })
  const url = `http://127.0.0.1:${port}`
  for (let i = 0; i < 400; i++) {
    if (child.exitCode !== null) throw new Error(`${script} exited during start`)
    try {
      if ((await fetch(`${url}/readyz`)).ok) break
    } catch {}
    await new Promise((r) => setTimeout(r, 50))
  }
  return {
    url,
    async stop() {
      if (child.exitCode !== null) return
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
      child.kill('SIGTERM')
      await exited
    },
  }
}

export async function call(url: string, method: string, path: string, token: string, body?: unknown) {
  const res = await fetch(`${url}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  })
  const text = await res.text()
  if (res.status >= 400) throw new Error(`${method} ${path}: ${res.status} ${text}`)
  return text ? JSON.parse(text) : undefined
}

/** A client with a grant holding every scope, and its API key. */
export async function seedTenant(url: string, clientCode: string, scopes: readonly string[]): Promise<string> {
  await call(url, 'PUT', `/admin/v1/clients/${clientCode}`, ADMIN_TOKEN, { name: clientCode })
  await call(url, 'PUT', `/admin/v1/integrations/int-${clientCode}`, ADMIN_TOKEN, { name: clientCode })
  await call(url, 'PUT', `/admin/v1/integrations/int-${clientCode}/grants/${clientCode}`, ADMIN_TOKEN, { scopes })
  return (await call(url, 'POST', `/admin/v1/integrations/int-${clientCode}/api-keys`, ADMIN_TOKEN, {})).apiKey
}
