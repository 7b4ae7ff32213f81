/**
 * `DATABASE_URL=postgres://… npx tsx bench/pipeline-probe.ts`: the mechanisms for a write in fewer round trips,
 * compared on the same PUT-shaped work (issue 36, docs/decisions.md "A write in few round trips"). The work is a
 * Receivable create's statements in miniature, on tables of their own in a scratch database: a gate (an
 * autocommitted counter and slot row), BEGIN, an identity lock, an insert-or-read of the resource, the
 * source-activity upsert, the feed append (head row and event), the render (a read of what was written), the slot
 * release, COMMIT. `PROBE_WRITERS` connections (default 10) each run writes one after another for `PROBE_SECONDS`
 * (default 5) per mechanism:
 *
 * - `sequential`: `pg` as before, one statement and its answer at a time (9 round trips).
 * - `pipelined`: `pg` in pipeline mode (`pipeline: true`), statements sent without waiting for earlier answers:
 *   [gate, BEGIN, lock, insert-or-read], [activity, feed, render, release], [COMMIT] (3 round trips; COMMIT waits
 *   for the render to be validated, as the unit of work requires).
 * - `pipelined-2`: the same with COMMIT sent with the writes (2 round trips: what validating after COMMIT would buy).
 * - `pipelined, one socket write`: `pipelined` with the socket corked for the tick, so each round trip's statements
 *   leave in one write instead of one per statement.
 * - `multi-statement`: one simple-protocol query string per phase, parameters inlined as quoted literals (3).
 * - `cte`: `pipelined` with the writes as one data-modifying CTE (3 round trips, fewer statements).
 *
 * Prints writes per second, mean and p99 latency, and the CPU per write of this process and of the backends (from
 * /proc: the database must run on this host), which a machine shared with other work disturbs far less than the
 * rates. A measurement, not a test.
 */
import { readFileSync } from 'node:fs'
import pg from 'pg'

const url = process.env.DATABASE_URL
if (!url) throw new Error('set DATABASE_URL')
const WRITERS = Number(process.env.PROBE_WRITERS ?? 10)
const SECONDS = Number(process.env.PROBE_SECONDS ?? 5)

const admin = new pg.Client({ connectionString: url })
await admin.connect()
const dbName = `pipeline_probe_${process.pid}`
await admin.query(`CREATE DATABASE ${dbName}`)
const probeUrl = new URL(url)
probeUrl.pathname = `/${dbName}`

const SCHEMA = `
CREATE TABLE gate (bucket text PRIMARY KEY, used int NOT NULL);
CREATE TABLE slots (bucket text, holder text, PRIMARY KEY (bucket, holder));
CREATE TABLE items (client text, id text, revision int NOT NULL, body jsonb NOT NULL, PRIMARY KEY (client, id));
CREATE TABLE activity (client text PRIMARY KEY, last_at timestamptz NOT NULL);
CREATE TABLE heads (client text PRIMARY KEY, last_seq bigint NOT NULL);
CREATE TABLE events (client text, seq bigint, id text, revision int, PRIMARY KEY (client, seq));`

const GATE = `WITH g AS (INSERT INTO gate VALUES ($1, 1) ON CONFLICT (bucket) DO UPDATE SET used = gate.used + 1 RETURNING used),
  s AS (INSERT INTO slots VALUES ($1, $2)) SELECT used FROM g`
const LOCK = 'SELECT pg_advisory_xact_lock(hashtextextended($1, 0))'
const UPSERT = `WITH ins AS (INSERT INTO items VALUES ($1, $2, 1, $3::jsonb) ON CONFLICT DO NOTHING RETURNING revision)
  SELECT revision, true AS created FROM ins UNION ALL SELECT revision, false FROM items WHERE client = $1 AND id = $2 AND NOT EXISTS (SELECT 1 FROM ins)`
const ACTIVITY = `INSERT INTO activity VALUES ($1, now()) ON CONFLICT (client) DO UPDATE SET last_at = now() RETURNING last_at`
const FEED = `WITH h AS (INSERT INTO heads VALUES ($1, 1) ON CONFLICT (client) DO UPDATE SET last_seq = heads.last_seq + 1 RETURNING last_seq)
  INSERT INTO events SELECT $1, h.last_seq, $2, 1 FROM h`
const RENDER = 'SELECT id, revision, body FROM items WHERE client = $1 AND id = $2'
const RELEASE = 'DELETE FROM slots WHERE bucket = $1 AND holder = $2'
const WRITES_CTE = `WITH a AS (INSERT INTO activity VALUES ($1, now()) ON CONFLICT (client) DO UPDATE SET last_at = now() RETURNING last_at),
  h AS (INSERT INTO heads VALUES ($1, 1) ON CONFLICT (client) DO UPDATE SET last_seq = heads.last_seq + 1 RETURNING last_seq),
  e AS (INSERT INTO events SELECT $1, h.last_seq, $2, 1 FROM h),
  r AS (DELETE FROM slots WHERE bucket = $1 AND holder = $3)
  SELECT i.id, i.revision, i.body FROM items i WHERE i.client = $1 AND i.id = $2`

/** CPU time (user + system, ms) the backends of these pids have used so far (Linux /proc; the database on this host). */
function backendCpu(pids: number[]): number {
  const tick = 10 // ms per clock tick (USER_HZ 100)
  let ms = 0
  for (const pid of pids) {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? []
    ms += (Number(fields[11]) + Number(fields[12])) * tick
  }
  return ms
}

type Write = (c: pg.Client, client: string, id: string, n: number) => Promise<void>
const named = (name: string, text: string, values: unknown[]) => ({ name, text, values })

const sequential: Write = async (c, client, id, n) => {
  const holder = `h${n}`
  await c.query(named('gate', GATE, [client, holder]))
  await c.query('BEGIN')
  await c.query(named('lock', LOCK, [`${client}/${id}`]))
  await c.query(named('upsert', UPSERT, [client, id, '{"a":1}']))
  await c.query(named('activity', ACTIVITY, [client]))
  await c.query(FEED, [client, id])
  await c.query(named('render', RENDER, [client, id]))
  await c.query(named('release', RELEASE, [client, holder]))
  await c.query('COMMIT')
}

/** The connection's socket, corked until the end of this tick: the statements sent meanwhile leave in one write. */
function corked(c: pg.Client, on: boolean): void {
  if (!on) return
  const stream = (c as unknown as { connection: { stream: NodeJS.WritableStream & { cork(): void; uncork(): void } } }).connection.stream
  stream.cork()
  process.nextTick(() => stream.uncork())
}

const pipelined =
  (commitWithWrites: boolean, cork = false): Write =>
  async (c, client, id, n) => {
    const holder = `h${n}`
    corked(c, cork)
    await Promise.all([
      c.query(named('gate', GATE, [client, holder])),
      c.query('BEGIN'),
      c.query(named('lock', LOCK, [`${client}/${id}`])),
      c.query(named('upsert', UPSERT, [client, id, '{"a":1}'])),
    ])
    corked(c, cork)
    await Promise.all([
      c.query(named('activity', ACTIVITY, [client])),
      c.query(FEED, [client, id]),
      c.query(named('render', RENDER, [client, id])),
      c.query(named('release', RELEASE, [client, holder])),
      ...(commitWithWrites ? [c.query('COMMIT')] : []),
    ])
    if (!commitWithWrites) await c.query('COMMIT')
  }

const cte: Write = async (c, client, id, n) => {
  const holder = `h${n}`
  await Promise.all([
    c.query(named('gate', GATE, [client, holder])),
    c.query('BEGIN'),
    c.query(named('lock', LOCK, [`${client}/${id}`])),
    c.query(named('upsert', UPSERT, [client, id, '{"a":1}'])),
  ])
  await c.query(named('writes', WRITES_CTE, [client, id, holder]))
  await c.query('COMMIT')
}

/** Parameters inlined as literals: `$n` replaced by the quoted value (the probe's texts have no `$` elsewhere). */
const inline = (text: string, values: string[]) => text.replace(/\$(\d+)/g, (_, i) => pg.escapeLiteral(values[Number(i) - 1] as string))
const multiStatement: Write = async (c, client, id, n) => {
  const holder = `h${n}`
  await c.query(
    [inline(GATE, [client, holder]), 'BEGIN', inline(LOCK, [`${client}/${id}`]), inline(UPSERT, [client, id, '{"a":1}'])].join(';\n'),
  )
  await c.query(
    [inline(ACTIVITY, [client]), inline(FEED, [client, id]), inline(RENDER, [client, id]), inline(RELEASE, [client, holder])].join(';\n'),
  )
  await c.query('COMMIT')
}

const MECHANISMS: [string, Write, boolean][] = [
  ['sequential (9 round trips)', sequential, false],
  ['pipelined (3 round trips)', pipelined(false), true],
  ['pipelined, COMMIT with the writes (2)', pipelined(true), true],
  ['pipelined, one socket write per round trip (3)', pipelined(false, true), true],
  ['multi-statement strings (3)', multiStatement, false],
  ['pipelined, writes as one CTE (3)', cte, true],
]

async function measure(name: string, write: Write, pipeline: boolean) {
  const clients = await Promise.all(
    Array.from({ length: WRITERS }, async () => {
      const c = new pg.Client({ connectionString: probeUrl.toString(), pipeline })
      c.on('error', () => {})
      await c.connect()
      return c
    }),
  )
  const pids = await Promise.all(clients.map(async (c) => (await c.query('SELECT pg_backend_pid() AS pid')).rows[0].pid as number))
  let counter = 0
  const latencies: number[] = []
  let measuring = false
  const run = async (c: pg.Client, w: number, until: number) => {
    while (Date.now() < until) {
      const t = performance.now()
      await write(c, `client${w}`, `${name.length}-${w}-${counter++}`, counter)
      if (measuring) latencies.push(performance.now() - t)
    }
  }
  // One second of warm-up, then the measurement.
  await Promise.all(clients.map((c, w) => run(c, w, Date.now() + 1000)))
  measuring = true
  const started = Date.now()
  const cpu0 = process.cpuUsage()
  const backend0 = backendCpu(pids)
  await Promise.all(clients.map((c, w) => run(c, w, started + SECONDS * 1000)))
  const seconds = (Date.now() - started) / 1000
  const cpu = process.cpuUsage(cpu0)
  const backendMs = backendCpu(pids) - backend0
  await Promise.all(clients.map((c) => c.end()))
  latencies.sort((a, b) => a - b)
  const mean = latencies.reduce((a, b) => a + b, 0) / latencies.length
  const p99 = latencies[Math.floor(latencies.length * 0.99)] ?? 0
  const n = latencies.length
  const clientMs = (cpu.user + cpu.system) / 1000
  console.log(
    `| ${name} | ${Math.round(n / seconds)} | ${mean.toFixed(2)} | ${p99.toFixed(2)} | ${((clientMs * 1000) / n).toFixed(0)} | ${((backendMs * 1000) / n).toFixed(0)} |`,
  )
}

try {
  const setup = new pg.Client({ connectionString: probeUrl.toString() })
  await setup.connect()
  await setup.query(SCHEMA)
  await setup.end()
  console.log(
    `${WRITERS} writers, ${SECONDS} s each\n\n| mechanism | writes/s | mean ms | p99 ms | client CPU µs/write | backend CPU µs/write |\n|---|---:|---:|---:|---:|---:|`,
  )
  // Each mechanism twice, the second pass in reverse order, so that a table growing through the run (or the machine's
  // other work) favours none.
  const order = [...MECHANISMS, ...[...MECHANISMS].reverse()]
  for (const [name, write, pipeline] of order) await measure(name, write, pipeline)
} finally {
  await admin.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`)
  await admin.end()
}
