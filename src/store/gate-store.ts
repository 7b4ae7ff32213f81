import type { Queryable, Store } from './store.ts'

/**
 * The request gate's statements (the protocol that uses them: src/http/limits.ts and src/http/admission.ts).
 *
 * Where the gate keeps its counters and slots is a property of the store, decided here and nowhere above: a
 * PostgreSQL database may be shared by several instances, so its limits live in it (one statement per request,
 * `request_gate`, on UNLOGGED tables); the embedded store is locked to the one process that owns it (DATA_DIR's
 * lock), so its limits live in that process's memory and cost no statement.
 */
export function limitsLiveInStore(store: Pick<Store, 'kind'>): boolean {
  return store.kind === 'postgres'
}

/** The gate's statements run on every request with a text that never varies: planned once per connection. */
const PREPARED = { prepared: true } as const

/** A row of `request_gate` (migrations/definitions/03_request_gate.sql): the key, its grant for the Client in the path, the count, the verdict. */
export interface GateRow {
  key_id: string
  key_integration_id: string
  grant_status: string | null
  grant_scopes: string[] | null
  grant_ip_allowlist: string[] | null
  grant_recovery_entry_mode: string | null
  grant_feed_mode: string | null
  grant_industry_profile: string | null
  grant_receipt_delivery_owner: string | null
  used: number
  admitted: boolean
}

/** The columns of `request_gate` (and of any gate statement a gated read is built on), in its order. */
const GATE_COLUMNS = [
  'key_id',
  'key_integration_id',
  'grant_status',
  'grant_scopes',
  'grant_ip_allowlist',
  'grant_recovery_entry_mode',
  'grant_feed_mode',
  'grant_industry_profile',
  'grant_receipt_delivery_owner',
  'used',
  'admitted',
] as const satisfies readonly (keyof GateRow)[]

/** What one call of `request_gate` decides on. */
export interface GateCall {
  digest: string
  environment: string
  clientCode: string
  /** In sandbox the Client is a bucket too. */
  sandbox: boolean
  windowStart: Date
  now: Date
  perMinute: number
  concurrency: number
  leaseSeconds: number
  /** The slot rows' holder; null: a gated read, whose slot is an advisory lock held for its statement. */
  holder: string | null
  /** Holders of this process whose release has not reached the store yet: their slots may be taken over. */
  unreleased: readonly string[]
}

/** The arguments of `request_gate` (migrations/definitions/03_request_gate.sql), in its order. */
function gateArgs(call: GateCall): unknown[] {
  return [
    call.digest,
    call.environment,
    call.clientCode,
    call.sandbox,
    call.windowStart.toISOString(),
    call.now.toISOString(),
    call.perMinute,
    call.concurrency,
    call.leaseSeconds,
    call.holder,
    [...call.unreleased],
    call.holder === null,
  ]
}

/** The gate on its own: no row for an unknown, revoked or other environment's key. */
export async function runGate(db: Queryable, call: GateCall): Promise<GateRow | undefined> {
  const rows = await db.query<GateRow>(
    'SELECT * FROM request_gate($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)',
    gateArgs(call),
    PREPARED,
  )
  return rows[0]
}

/** A request's one read (its parameters numbered from $1), to run in the gate's statement. */
export interface ReadStatement {
  sql: string
  params: readonly unknown[]
  /** The grant scopes the route needs: without them (or without an active grant) nothing is read. */
  scopes: readonly string[]
}

/** The gate and a read in one statement (`gatedReadSql`): the gate's row, and the read's rows if it ran. */
export async function runGatedRead<T extends object>(
  db: Queryable,
  call: GateCall,
  read: ReadStatement,
): Promise<{ gate: GateRow | undefined; read: T[] }> {
  const p = read.params.length
  const args = gateArgs(call)
  const gateSql = `SELECT * FROM request_gate(${args.map((_, i) => `$${p + i + 1}`).join(', ')})`
  const sql = gatedReadSql(gateSql, read.sql, p + args.length + 1)
  const rows = await db.query<Record<string, unknown>>(sql, [...read.params, ...args, read.scopes], PREPARED)
  return splitGatedRows<GateRow, T>(rows)
}

/** The gate's columns in a gated read's rows: prefixed, so that no column of the read can clash with them. */
const GATE_PREFIX = '_gate_'

/**
 * A gate statement (`gateSql`, parameters after the read's) and a request's one read, as one statement: one
 * row per read row, each carrying the gate's columns (prefixed `_gate_`), or one row with the read's columns
 * null when nothing was read; no row when the gate returned none (an unknown key). The read runs only for an
 * admitted request with an active grant holding the scopes in parameter `$scopesParam` (a text array): the
 * condition is a one-time filter, so a refused request reads nothing. Read rows keep their order.
 */
export function gatedReadSql(gateSql: string, readSql: string, scopesParam: number): string {
  const g = GATE_COLUMNS.map((c) => `g.${c} AS ${GATE_PREFIX}${c}`).join(', ')
  return (
    `WITH _gate AS MATERIALIZED (${gateSql}) ` +
    `SELECT ${g}, r.* FROM _gate g LEFT JOIN LATERAL (` +
    `SELECT row_number() OVER () AS ${GATE_PREFIX}row, q.* FROM (${readSql}) q ` +
    `WHERE g.admitted AND g.grant_status = 'active' AND g.grant_scopes @> $${scopesParam}::text[]` +
    `) r ON true ORDER BY r.${GATE_PREFIX}row`
  )
}

/** A gated read's rows, split: the gate's row (undefined: the gate returned none) and the read's rows. */
export function splitGatedRows<G, T>(rows: Record<string, unknown>[]): { gate: G | undefined; read: T[] } {
  const first = rows[0]
  if (!first) return { gate: undefined, read: [] }
  const gate: Record<string, unknown> = {}
  for (const c of GATE_COLUMNS) gate[c] = first[`${GATE_PREFIX}${c}`]
  const read: T[] = []
  for (const row of rows) {
    if (row[`${GATE_PREFIX}row`] === null) continue
    const out: Record<string, unknown> = {}
    for (const [k, v] of Object.entries(row)) if (!k.startsWith(GATE_PREFIX)) out[k] = v
    read.push(out as T)
  }
  return { gate: gate as G, read }
}

/**
 * One statement per bucket frees a holder's slots, on its own or inside the request's write transaction. `buckets` null: a
 * gate statement whose answer was lost (the connection dropped after it committed), so its buckets are unknown;
 * the holder alone finds its rows.
 */
export async function releaseSlots(db: Queryable, buckets: readonly string[] | null, holder: string): Promise<void> {
  if (buckets === null) await db.query('DELETE FROM inflight_requests WHERE holder = $1', [holder])
  // One statement per bucket (one in production, the key's; two in sandbox): on Citus the table is distributed by
  // bucket, so each is routed to one node (docs/scaling.md, "The request gate"). Sent together: inside a transaction
  // on PostgreSQL they share one round trip (pipeline mode, src/store/postgres.ts). Prepared: every request runs it,
  // in its write's transaction or on its own (unprepared, it was planned afresh each time: 39 µs to 12 of execution).
  else
    await Promise.all(
      buckets.map((bucket) => db.query('DELETE FROM inflight_requests WHERE bucket = $1 AND holder = $2', [bucket, holder], PREPARED)),
    )
}

/** A release on its own (after the response, not in a transaction). */
export const releaseSlotsNow = (db: Queryable, buckets: readonly string[] | null, holder: string) => releaseSlots(db, buckets, holder)

/** Old windows and expired leases are only clutter: the retention worker calls this. */
export async function purgeLimitRows(db: Queryable): Promise<void> {
  await db.query(`DELETE FROM rate_limit_windows WHERE window_start < now() - interval '5 minutes'`)
  await db.query(`DELETE FROM inflight_requests WHERE expires_at < now() - interval '5 minutes'`)
}
