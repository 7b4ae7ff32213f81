import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { after, describe, test } from 'node:test'
import { parse as parseYaml } from 'yaml'
import { loadConfig } from '../../src/config.ts'
import { freePort, http, spawnProcess } from '../helpers/service-process.ts'
import { createTestDatabase, engineName, onPostgres, type TestDatabase } from '../helpers/store.ts'

/**
 * Issue 13.3, the production path: the Dockerfile, .dockerignore and compose.yaml follow their rules, and the
 * image's runtime stage runs. No Docker engine runs here (only the CLI), so the runtime stage is reproduced
 * without one: the Dockerfile's own instructions, stage by stage, in temporary directories (COPY as copies,
 * RUN as commands, `npm ci` from the npm cache where it can), then its CMD with the production environment that
 * compose.yaml gives an instance: on PostgreSQL a fresh database, on the embedded store a fresh DATA_DIR.
 */
const root = process.cwd()
const dockerfileText = readFileSync('Dockerfile', 'utf8')
const composeText = readFileSync('compose.yaml', 'utf8')
const dockerignore = readFileSync('.dockerignore', 'utf8')
const mainSource = readFileSync('src/main.ts', 'utf8')

interface Instruction {
  op: string
  args: string
}
interface Stage {
  image: string
  name: string
  instructions: Instruction[]
}

/** The Dockerfile as stages of instructions: comments dropped, continuation lines joined. */
function parseDockerfile(text: string): Stage[] {
  const lines = text
    .split('\n')
    .filter((l) => !/^\s*#/.test(l))
    .join('\n')
    .replace(/\\\n/g, ' ')
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean)
  const stages: Stage[] = []
  for (const line of lines) {
    const m = /^([A-Z]+)\s+(.*)$/.exec(line)
    assert.ok(m, `not an instruction: ${line}`)
    const [, op, args] = m as unknown as [string, string, string]
    if (op === 'FROM') {
      const from = /^(\S+)\s+AS\s+(\S+)$/i.exec(args)
      assert.ok(from, `every stage is named: FROM ${args}`)
      stages.push({ image: from[1] as string, name: from[2] as string, instructions: [] })
      continue
    }
    assert.ok(stages.length > 0, `${op} before FROM`)
    stages.at(-1)?.instructions.push({ op, args: args.replace(/\s+/g, ' ') })
  }
  return stages
}

const stages = parseDockerfile(dockerfileText)
const stage = (name: string) => {
  const s = stages.find((x) => x.name === name)
  assert.ok(s, `stage ${name}`)
  return s
}
const ops = (s: Stage, op: string) => s.instructions.filter((i) => i.op === op).map((i) => i.args)
/** An exec-form (JSON array) argument list, or undefined for the shell form. */
function execForm(args: string): string[] | undefined {
  if (!args.startsWith('[')) return undefined
  const list = JSON.parse(args) as unknown
  assert.ok(Array.isArray(list) && list.every((x) => typeof x === 'string'), args)
  return list as string[]
}
/** ENV instructions as a map (the `K=V K2=V2` form). */
function envOf(s: Stage): Record<string, string> {
  const env: Record<string, string> = {}
  for (const args of ops(s, 'ENV')) {
    for (const pair of args.split(' ')) {
      const m = /^([A-Z_][A-Z0-9_]*)=(.*)$/.exec(pair)
      assert.ok(m, `ENV in K=V form: ${pair}`)
      env[m[1] as string] = m[2] as string
    }
  }
  return env
}

const SECRET_NAMES = ['ADMIN_TOKEN', 'WEBHOOK_SECRET_KEY', 'DATABASE_URL', 'POSTGRES_PASSWORD']
const STOP_DEADLINE_S = Number((/const STOP_DEADLINE_MS = ([\d_]+)/.exec(mainSource)?.[1] ?? 'NaN').replace(/_/g, '')) / 1000

describe('Dockerfile', () => {
  test('two stages from the same official Node 24 image, pinned to a minor release', () => {
    assert.deepEqual(
      stages.map((s) => s.name),
      ['build', 'runtime'],
    )
    const [build, runtime] = stages as [Stage, Stage]
    assert.equal(build.image, runtime.image)
    assert.match(runtime.image, /^node:24\.\d+(-(bookworm|trixie|slim|alpine[\d.]*))*$/)
    // The minor is at least the first Node 24 LTS release, which package.json's engines asks for.
    const minor = Number(/^node:24\.(\d+)/.exec(runtime.image)?.[1])
    const engines = JSON.parse(readFileSync('package.json', 'utf8')).engines.node as string
    assert.match(engines, />=24\.11\.0/)
    assert.ok(minor >= 11, runtime.image)
  })

  test("build: a full `npm ci` (dev dependencies) and the service's part of `npm run build`", () => {
    const runs = ops(stage('build'), 'RUN')
    assert.ok(
      runs.some((r) => /^npm ci\b/.test(r) && !r.includes('--omit')),
      runs.join('\n'),
    )
    const build = 'npx tsc -b tsconfig.build.json && cp -R src/store/migrations dist/store/migrations'
    assert.ok(runs.includes(build), runs.join('\n'))
    // The same compilation and the same migrations copy as package.json's build, which also builds the SDK.
    const script = JSON.parse(readFileSync('package.json', 'utf8')).scripts.build as string
    assert.match(script, /^tsc -b tsconfig\.build\.json && /)
    assert.ok(script.includes("fs.cpSync('src/store/migrations','dist/store/migrations',{recursive:true})"), script)
  })

  test('runtime: `npm ci --omit=dev`, dist/ from the build stage, nothing built or compiled there', () => {
    const runtime = stage('runtime')
    const runs = ops(runtime, 'RUN')
    assert.equal(runs.filter((r) => /\bnpm ci\b/.test(r) && /--omit=dev\b/.test(r)).length, 1, runs.join('\n'))
    assert.equal(
      runs.some((r) => /npm run build|\btsc\b|\btsx\b|npm (install|i) /.test(r)),
      false,
    )
    const copies = ops(runtime, 'COPY')
    assert.deepEqual(
      copies.filter((c) => c.startsWith('--from')),
      ['--from=build /app/dist ./dist'],
    )
    // From the build context: the manifests for npm ci, the CLI launcher and the guide's Markdown; never src/, tests
    // or .env files.
    assert.deepEqual(
      copies.filter((c) => !c.startsWith('--from')),
      ['package.json package-lock.json ./', 'bin ./bin', 'docs/guide ./docs/guide'],
    )
  })

  test('runs as the unprivileged node user, from before the command on', () => {
    const runtime = stage('runtime')
    const users = ops(runtime, 'USER')
    assert.deepEqual(users, ['node'])
    const at = (op: string) => runtime.instructions.findIndex((i) => i.op === op)
    assert.ok(at('USER') < at('CMD') && at('USER') < at('HEALTHCHECK'))
    // Nothing after USER runs as root again.
    assert.equal(runtime.instructions.slice(at('USER')).filter((i) => i.op === 'RUN').length, 0)
  })

  test('HEALTHCHECK asks /readyz on the service port; EXPOSE is that port', () => {
    const runtime = stage('runtime')
    const [health] = ops(runtime, 'HEALTHCHECK')
    assert.ok(health)
    const m = /^((?:--[a-z-]+=\S+ )*)CMD (.*)$/.exec(health)
    assert.ok(m, health)
    const cmd = execForm(m[2] as string)
    assert.ok(cmd, 'HEALTHCHECK CMD in exec form')
    assert.equal(cmd[0], 'node')
    assert.match(cmd.join(' '), /http:\/\/127\.0\.0\.1:'\+\(process\.env\.PORT\|\|8080\)\+'\/readyz/)
    assert.match(cmd.join(' '), /r\.status===200\?0:1/)
    assert.deepEqual(ops(runtime, 'EXPOSE'), [envOf(runtime).PORT])
    assert.equal(envOf(runtime).PORT, '8080')
  })

  test('CMD is exec form: node itself is PID 1 and gets SIGTERM (no shell, no npm)', () => {
    const runtime = stage('runtime')
    assert.deepEqual(ops(runtime, 'ENTRYPOINT'), [])
    const cmds = ops(runtime, 'CMD')
    assert.equal(cmds.length, 1)
    assert.deepEqual(execForm(cmds[0] as string), ['node', '--enable-source-maps', 'dist/main.js'])
    assert.deepEqual(ops(runtime, 'STOPSIGNAL'), ['SIGTERM'])
  })

  test('no secret is baked in: no ENV or ARG of a credential, no .env copied', () => {
    for (const s of stages) {
      for (const i of s.instructions) {
        if (i.op === 'ENV' || i.op === 'ARG') {
          for (const name of SECRET_NAMES) assert.equal(i.args.includes(name), false, `${i.op} ${i.args}`)
        }
        if (i.op === 'COPY') assert.equal(/\.env|\.npmrc|data\b/.test(i.args), false, `COPY ${i.args}`)
      }
    }
    assert.equal(envOf(stage('runtime')).NODE_ENV, 'production')
  })

  test('.dockerignore admits exactly what the Dockerfile copies from the context', () => {
    const lines = dockerignore
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l && !l.startsWith('#'))
    assert.equal(lines[0], '*', 'everything is excluded first')
    const admitted = lines
      .slice(1)
      .map((l) => {
        assert.ok(l.startsWith('!'), l)
        return l.slice(1).replace(/\/$/, '')
      })
      .sort()
    const copied = stages
      .flatMap((s) => ops(s, 'COPY'))
      .filter((c) => !c.startsWith('--from'))
      .flatMap((c) => c.split(' ').slice(0, -1))
    assert.deepEqual(admitted, [...new Set(copied)].sort())
  })
})

/** Compose's variable interpolation: `$$`, `$VAR`, `${VAR}`, `${VAR:-default}`, `${VAR-default}`, `${VAR:?error}`, `${VAR?error}`. */
function interpolate(value: string, env: Record<string, string | undefined>): string {
  return value.replace(
    /\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?)([-?])([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)/g,
    (all, name?: string, colon?: string, kind?: string, word?: string, bare?: string) => {
      if (all === '$$') return '$'
      if (bare) return env[bare] ?? ''
      const v = env[name as string]
      const missing = colon ? v === undefined || v === '' : v === undefined
      if (!kind) return v ?? ''
      if (!missing) return v as string
      if (kind === '-') return word ?? ''
      throw new Error(`${name}: ${word}`)
    },
  )
}

// biome-ignore lint/suspicious/noExplicitAny: the compose document is inspected field by field
const compose = parseYaml(composeText, { merge: true }) as any
const instances = Object.keys(compose.services).filter((n) => compose.services[n].build !== undefined)

/** What an operator sets (compose.yaml's header), with values of the right shapes. */
const operatorEnv = {
  POSTGRES_PASSWORD: 'a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718',
  ADMIN_TOKEN: 'deployment-test-operator-token-0123456789',
  WEBHOOK_SECRET_KEY: '00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff',
  PUBLIC_BASE_URL: 'https://receivables.example.com',
}
const REQUIRED = Object.keys(operatorEnv)

/** An instance's environment as compose gives it to the container (every value interpolated). */
function instanceEnv(name: string, env: Record<string, string | undefined>): Record<string, string> {
  return Object.fromEntries(
    Object.entries(compose.services[name].environment as Record<string, string>).map(([k, v]) => [k, interpolate(String(v), env)]),
  )
}

describe('compose.yaml', () => {
  test('PostgreSQL and two instances of the image built here, nothing else', () => {
    assert.deepEqual(Object.keys(compose.services).sort(), ['inbound-1', 'inbound-2', 'postgres'])
    assert.deepEqual(instances, ['inbound-1', 'inbound-2'])
    assert.match(compose.services.postgres.image, /^postgres:\d+(-bookworm)?$/)
    for (const name of instances) {
      const s = compose.services[name]
      assert.equal(s.build, '.')
      assert.equal(s.image, compose.services['inbound-1'].image)
      assert.deepEqual(s.depends_on, { postgres: { condition: 'service_healthy' } })
    }
    assert.deepEqual(compose.services.postgres.healthcheck.test, ['CMD', 'pg_isready', '-U', 'inbound', '-d', 'inbound'])
  })

  test('each instance: its own host port to the container port, /readyz healthcheck, time to stop gracefully', () => {
    const hostPorts = instances.map((name) => {
      const s = compose.services[name]
      assert.equal(s.ports.length, 1)
      const m = /^\$\{INBOUND_BIND:-127\.0\.0\.1\}:\$\{(INBOUND_\d_PORT):-(\d+)\}:(\d+)$/.exec(s.ports[0])
      assert.ok(m, s.ports[0])
      assert.equal(m[3], envOf(stage('runtime')).PORT)
      assert.equal(instanceEnv(name, operatorEnv).PORT, m[3])
      assert.equal(s.healthcheck.test[0], 'CMD')
      assert.match(s.healthcheck.test.join(' '), /fetch\('http:\/\/127\.0\.0\.1:8080\/readyz'\)/)
      // Docker's default of 10 s would SIGKILL the service inside its own stop deadline.
      const grace = Number(/^(\d+)s$/.exec(s.stop_grace_period)?.[1])
      assert.ok(grace > STOP_DEADLINE_S && STOP_DEADLINE_S >= 10, `${s.stop_grace_period} vs ${STOP_DEADLINE_S} s`)
      return [m[1], m[2]]
    })
    assert.deepEqual(hostPorts, [
      ['INBOUND_1_PORT', '8081'],
      ['INBOUND_2_PORT', '8082'],
    ])
  })

  test('credentials come only from the environment: each required, none written in the file', () => {
    for (const name of instances) {
      const env = compose.services[name].environment as Record<string, string>
      for (const v of ['ADMIN_TOKEN', 'WEBHOOK_SECRET_KEY', 'PUBLIC_BASE_URL'])
        assert.match(env[v] as string, new RegExp(`^\\$\\{${v}:\\?[^}]+\\}$`))
      assert.match(env.DATABASE_URL as string, /^postgres:\/\/inbound:\$\{POSTGRES_PASSWORD:\?[^}]+\}@postgres:5432\/inbound$/)
      assert.equal(env.SERVICE_ENVIRONMENT, 'production')
    }
    assert.match(compose.services.postgres.environment.POSTGRES_PASSWORD, /^\$\{POSTGRES_PASSWORD:\?[^}]+\}$/)
    // Every value of a variable named like a credential is an interpolation, and nothing in the file looks like one.
    for (const s of Object.values(compose.services) as { environment: Record<string, string> }[]) {
      for (const [k, v] of Object.entries(s.environment)) {
        if (/TOKEN|SECRET|PASSWORD|KEY/.test(k)) assert.match(String(v), /^\$\{[A-Z_]+:\?[^}]+\}$/, k)
      }
    }
    assert.equal(/\b[0-9a-f]{32,}\b|adm_|irk_|whsec_/i.test(composeText), false)
  })

  test('with the operator variables set, each instance gets a valid production configuration; without one, compose refuses', () => {
    for (const name of instances) {
      const config = loadConfig(instanceEnv(name, operatorEnv))
      assert.equal(config.environment, 'production')
      assert.equal(config.databaseUrl, `postgres://inbound:${operatorEnv.POSTGRES_PASSWORD}@postgres:5432/inbound`)
      assert.equal(config.adminToken, operatorEnv.ADMIN_TOKEN)
      assert.equal(config.webhooks.secretKeyHex, operatorEnv.WEBHOOK_SECRET_KEY)
      assert.equal(config.publicBaseUrl, operatorEnv.PUBLIC_BASE_URL)
      assert.equal(config.host, '0.0.0.0')
      assert.equal(config.trustProxy, false)
      for (const missing of REQUIRED) {
        assert.throws(() => instanceEnv(name, { ...operatorEnv, [missing]: undefined }), new RegExp(`^Error: ${missing}: set ${missing}`))
        assert.throws(() => instanceEnv(name, { ...operatorEnv, [missing]: '' }), new RegExp(`^Error: ${missing}: `))
      }
    }
  })

  test('`docker compose config` (or docker-compose) accepts the file and refuses a missing secret', (t) => {
    const cli = [
      ['docker', ['compose']],
      ['docker-compose', []],
    ].find(([cmd, pre]) => spawnSync(cmd as string, [...(pre as string[]), 'version'], { encoding: 'utf8' }).status === 0) as
      | [string, string[]]
      | undefined
    if (!cli) {
      t.skip('neither the docker compose plugin nor docker-compose is installed (apt-get install docker-compose)')
      return
    }
    const [cmd, pre] = cli
    const base: Record<string, string> = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/root' }
    const ok = spawnSync(cmd, [...pre, '-f', 'compose.yaml', 'config'], { encoding: 'utf8', env: { ...base, ...operatorEnv } })
    assert.equal(ok.status, 0, ok.stderr)
    const rendered = parseYaml(ok.stdout) as { services: Record<string, { environment: Record<string, string> }> }
    assert.deepEqual(Object.keys(rendered.services).sort(), ['inbound-1', 'inbound-2', 'postgres'])
    assert.deepEqual(rendered.services['inbound-2']?.environment, instanceEnv('inbound-2', operatorEnv))
    const refused = spawnSync(cmd, [...pre, '-f', 'compose.yaml', 'config'], {
      encoding: 'utf8',
      env: { ...base, ...operatorEnv, WEBHOOK_SECRET_KEY: '' },
    })
    assert.notEqual(refused.status, 0)
    assert.match(refused.stderr, /set WEBHOOK_SECRET_KEY to 64 hex digits/)
  })
})

describe(`the image's runtime stage, reproduced without Docker (${engineName} store)`, () => {
  const work = mkdtempSync(join(tmpdir(), 'irs-image-'))
  let db: TestDatabase | undefined
  let service: ReturnType<typeof spawnProcess> | undefined
  after(async () => {
    await service?.kill()
    await db?.drop()
    rmSync(work, { recursive: true, force: true })
  })

  /** A stage's directories: its WORKDIR, and its other absolute paths under a root of its own. */
  const stageRoot = (name: string) => join(work, name)
  const inStage = (name: string, path: string) => join(stageRoot(name), path)

  /**
   * Runs one stage's instructions. COPY copies (from the repository, or from an earlier stage's directory); RUN
   * runs each `&&` part: `npm ci` from the npm cache where it can (`--prefer-offline`), `npm cache clean`
   * skipped (it would empty this machine's cache, not an image layer), `mkdir -p` under the stage's root, `chown`
   * skipped (this test is one user; the USER rule is checked above), anything else as a command. An instruction
   * this does not know fails the test, so the Dockerfile cannot drift from what is proved here.
   * Returns false when npm could not reach the registry or its cache.
   */
  function runStage(s: Stage): boolean {
    let workdir = '/'
    const local = (p: string) => inStage(s.name, resolve(workdir, p))
    for (const { op, args } of s.instructions) {
      if (op === 'WORKDIR') {
        workdir = args
        mkdirSync(local('.'), { recursive: true })
      } else if (op === 'COPY') {
        const from = /^--from=(\S+) /.exec(args)?.[1]
        const parts = args.replace(/^--from=\S+ /, '').split(' ')
        const dest = parts.pop() as string
        for (const src of parts) {
          const source = from ? inStage(from, src) : join(root, src)
          assert.ok(existsSync(source), `COPY source ${src}${from ? ` in stage ${from}` : ''}`)
          const target = dest.endsWith('/') ? join(local(dest), src.split('/').at(-1) as string) : local(dest)
          mkdirSync(dirname(target), { recursive: true })
          cpSync(source, target, { recursive: true })
        }
      } else if (op === 'RUN') {
        for (const part of args.split(' && ')) {
          if (/^npm cache clean\b/.test(part) || /^chown\b/.test(part)) continue
          const mkdir = /^mkdir -p (\S+)$/.exec(part)
          if (mkdir) {
            mkdirSync(local(mkdir[1] as string), { recursive: true })
            continue
          }
          assert.ok(
            /^npm ci\b/.test(part) || ['npx tsc -b tsconfig.build.json', 'cp -R src/store/migrations dist/store/migrations'].includes(part),
            `the test does not mirror RUN ${part}`,
          )
          const command = /^npm ci\b/.test(part) ? `${part} --prefer-offline` : part
          const r = spawnSync('sh', ['-c', command], {
            cwd: local('.'),
            encoding: 'utf8',
            env: { ...process.env, npm_config_update_notifier: 'false' },
          })
          if (r.status !== 0 && /ENOTCACHED|ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ETIMEDOUT|ECONNRESET/.test(r.stderr)) return false
          assert.equal(r.status, 0, `${command}\n${r.stdout}\n${r.stderr}`)
        }
      } else {
        assert.ok(['ENV', 'USER', 'EXPOSE', 'HEALTHCHECK', 'STOPSIGNAL', 'CMD'].includes(op), `the test does not mirror ${op}`)
      }
    }
    return true
  }

  test('built and installed as the Dockerfile says, `node dist/main.js` starts in production and /readyz answers 200', {
    timeout: 600_000,
  }, async (t) => {
    for (const s of stages) {
      if (!runStage(s)) {
        t.skip('the npm registry and the npm cache are both unreachable: the runtime stage cannot be installed here')
        return
      }
    }
    const app = inStage('runtime', '/app')
    // The installed tree is production only: no TypeScript, tsx, Biome or test tools, and nothing above it that
    // node could resolve from instead.
    const installed = readdirSync(join(app, 'node_modules'))
    for (const dev of ['typescript', 'tsx', 'esbuild', 'fast-check', '@biomejs', 'playwright-core', 'autocannon']) {
      assert.equal(installed.includes(dev), false, `${dev} in the runtime stage`)
    }
    for (const prod of ['fastify', 'pg', '@electric-sql', 'zod', 'pino', 'undici', 'swagger-ui-dist', 'stripe'])
      assert.ok(installed.includes(prod), prod)
    for (let d = dirname(app); d !== dirname(d); d = dirname(d)) assert.equal(existsSync(join(d, 'node_modules')), false, d)
    assert.deepEqual(readdirSync(app).sort(), ['bin', 'dist', 'docs', 'node_modules', 'package-lock.json', 'package.json'])
    assert.ok(existsSync(join(app, 'dist/store/migrations')))

    const port = await freePort()
    const url = `http://127.0.0.1:${port}`
    const store: Record<string, string> = {}
    if (onPostgres) {
      db = await createTestDatabase()
      store.DATABASE_URL = db.url as string
    } else {
      // Without DATABASE_URL the image keeps the embedded store in its DATA_DIR (/data, made by the stage).
      store.DATABASE_URL = ''
      store.DATA_DIR = inStage('runtime', envOf(stage('runtime')).DATA_DIR as string)
      assert.ok(existsSync(store.DATA_DIR))
    }
    // The container's environment: the image's ENV, then what compose.yaml gives inbound-1; this test's store,
    // and loopback instead of 0.0.0.0. Nothing else of this process's environment.
    const env: Record<string, string> = {
      PATH: process.env.PATH ?? '',
      HOME: app,
      ...envOf(stage('runtime')),
      ...instanceEnv('inbound-1', operatorEnv),
      ...store,
      HOST: '127.0.0.1',
      PORT: String(port),
    }
    if (!store.DATABASE_URL) delete env.DATABASE_URL
    const [cmd, ...args] = execForm(ops(stage('runtime'), 'CMD')[0] as string) as [string, ...string[]]
    assert.equal(cmd, 'node')
    // In the stage's directory (the image's WORKDIR), with exactly that environment: every other variable of
    // this process is removed (spawnProcess removes a variable given as undefined).
    service = spawnProcess('sh', ['-c', `cd "${app}" && exec "${process.execPath}" ${args.map((a) => `'${a}'`).join(' ')}`], {
      ...Object.fromEntries(Object.keys(process.env).map((k) => [k, undefined])),
      ...env,
    })
    await service.waitReady(url)
    const ready = await http(url, 'GET', '/readyz')
    assert.deepEqual([ready.status, ready.json], [200, { status: 'ready' }])
    // The guide renders from the image's copy of docs/guide.
    const guide = await fetch(`${url}/docs/guide/getting-started`)
    assert.equal(guide.status, 200)
    assert.match(await guide.text(), /<h1>Getting started<\/h1>/)
    assert.match(service.output(), /"environment":"production"/)
    assert.match(service.output(), new RegExp(`"store":"${onPostgres ? 'postgres' : 'pglite'}"`))
    // The operator token from the environment works, and nothing was generated or shown once.
    const clients = await http(url, 'GET', '/admin/v1/clients', { token: operatorEnv.ADMIN_TOKEN })
    assert.deepEqual([clients.status, clients.json], [200, { data: [], nextCursor: null }])
    assert.equal(service.output().includes('shownOnce'), false)
    // The API reference's assets come from a production dependency.
    assert.equal((await fetch(`${url}/docs/assets/swagger-ui.css`)).status, 200)
    // The CLI launcher runs the built CLI in the image.
    const cli = spawnSync(process.execPath, ['bin/inbound.js', 'client', 'list', '--json', '--url', url], {
      cwd: app,
      encoding: 'utf8',
      env: { PATH: env.PATH, HOME: app, ADMIN_TOKEN: operatorEnv.ADMIN_TOKEN },
    })
    assert.equal(cli.status, 0, cli.stderr)
    assert.deepEqual(JSON.parse(cli.stdout), { data: [], nextCursor: null })

    service.child.kill('SIGTERM')
    assert.deepEqual(await service.exited, { code: 0, signal: null })
    assert.match(service.output(), /"msg":"stopped"/)
  })
})
