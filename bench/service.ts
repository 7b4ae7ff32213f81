import { type ChildProcess, spawn } from 'node:child_process'
import { readFileSync } from 'node:fs'
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
  /** Sends the process a signal (bench/receipts-service.ts holds and releases its receipt dispatcher so). */
  signal(signal: NodeJS.Signals): void
  /** The child's process id (bench/cpu-per-request.ts reads its CPU time from /proc). */
  pid: number
}

/** Every child process started by startService and not yet stopped (stopAllServices, and the exit hook below). */
const live = new Set<ChildProcess>()

// The last resort: whatever way the benchmark's process ends (an uncaught error, process.exit), no child it
// started outlives it. A signal sent synchronously here is all an exit hook can do.
process.on('exit', () => {
  for (const child of live) child.kill('SIGKILL')
})

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) {
    live.delete(child)
    return
  }
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  child.kill('SIGTERM')
  // A child that does not stop within 30 s (the service's own stop deadline is 20 s) is killed.
  const timer = setTimeout(() => child.kill('SIGKILL'), 30_000)
  await exited
  clearTimeout(timer)
  live.delete(child)
}

/** Stops every child process still running (SIGTERM, then SIGKILL after 30 s): for an interrupted run. */
export async function stopAllServices(): Promise<void> {
  await Promise.all([...live].map((child) => stopChild(child)))
}

/**
 * A process of the benchmark, started the way the service is: this Node with the same flags, through tsx.
 * `script` is src/main.ts (the real service, with the limits raised by configuration), bench/limits-off.ts (the
 * same app with its limits off), bench/bare-server.ts (the bare baseline) or bench/floor-server.ts (the
 * durable-write floor): the baseline, the floor and the service each have a process of their own and compete
 * for the machine alike. Ready when GET /readyz answers 2xx; a child that exits or is not ready within 60 s
 * fails the start (and is stopped).
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
  live.add(child)
  const url = `http://127.0.0.1:${port}`
  let ready = false
  for (let i = 0; i < 1200 && !ready; i++) {
    if (child.exitCode !== null || child.signalCode !== null) {
      live.delete(child)
      throw new Error(`${script} exited during start`)
    }
    try {
      ready = (await fetch(`${url}/readyz`)).ok
    } catch {}
    if (!ready) await new Promise((r) => setTimeout(r, 50))
  }
  if (!ready) {
    await stopChild(child)
    throw new Error(`${script} was not ready within 60 s`)
  }
  return { url, stop: () => stopChild(child), signal: (signal) => void child.kill(signal), pid: child.pid as number }
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

/** User + system CPU of a process so far, ms (Linux /proc, 100 ticks a second); 0 once it is gone. */
export function cpuMs(pid: number): number {
  try {
    const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? []
    return (Number(f[11]) + Number(f[12])) * 10
  } catch {
    return 0
  }
}
