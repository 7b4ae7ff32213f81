import { appendFileSync } from 'node:fs'
import { relative } from 'node:path'
import { clientKeyedTables } from '../../src/store/layout.ts'
import type { Queryable, Store } from '../../src/store/store.ts'
import { notingAhead } from './noting-ahead.ts'

/**
 * The statement audit (docs/scaling.md, "The statement audit"): every distinct statement the service sends,
 * judged against the router rule Citus applies, that each client-keyed table a statement touches is narrowed to
 * one client by the statement itself.
 *
 * How it judges: on a database of the partitioned layout (src/store/layout.ts), each statement is prepared and
 * explained with a generic plan (`plan_cache_mode = force_generic_plan`, then EXPLAIN EXECUTE with the values it
 * was sent with). A generic plan prunes partitions only on what the statement's own text and parameters fix, not
 * on what another part of it reads at run time, which is what Citus's router planner can route on. A client-keyed
 * table the plan scans in more than one partition is not routed. Rows an INSERT adds are routed by their own
 * client_code on both engines, so an INSERT's target is not judged; what it reads is.
 */

/** One distinct statement: its text, the parameters of its first run, and where in src/ it was sent from. */
export interface RecordedStatement {
  sql: string
  params: unknown[]
  source: string
}

export type Verdict = 'routed' | 'not routed' | 'no client table' | 'not judged'

export interface Judged extends RecordedStatement {
  verdict: Verdict
  /** Client-keyed tables scanned in more than one partition, with the count. */
  unrouted: { table: string; partitions: number }[]
  /** Why a statement was not judged (a statement EXPLAIN cannot take, a statement of no data). */
  note?: string
}

/** A statement allowed not to be routed: where it comes from, a piece of its text, and the reason. */
export interface Exception {
  name: string
  source: string
  sqlIncludes: string
  reason: string
}

const root = new URL('../../', import.meta.url).pathname

/** Frames of the stores' plumbing and of this helper: the sender is the first frame in src/ after them. */
const PLUMBING = /\/src\/store\/(postgres|pglite|transactions|one-statement|open|savepoints)\.ts|\/test\/helpers\//

/** Where a statement was sent from: `src/<file>:<line>`, or '' when no frame is in src/ (a test's own statement). */
export function senderOf(stack: string | undefined): string {
  for (const line of (stack ?? '').split('\n').slice(1)) {
    const m = /\(?((?:file:\/\/)?\/[^():]+\.ts):(\d+):\d+\)?$/.exec(line.trim())
    if (!m?.[1] || PLUMBING.test(m[1])) continue
    const file = relative(root, m[1].replace(/^file:\/\//, ''))
    if (file.startsWith('src/')) return `${file}:${m[2]}`
  }
  return ''
}

/**
 * Records every statement `store` runs from now on, in place (its own transactions' statements included), into
 * `into` (the first run of each text). Statements with no sender in src/ (a test's own) are left out.
 */
export function recordStatements(store: Store, into: Map<string, RecordedStatement>): void {
  const note = (sql: string, params: readonly unknown[] | undefined) => {
    if (into.has(sql)) return
    const source = senderOf(new Error().stack)
    if (source) into.set(sql, { sql, params: [...(params ?? [])], source })
  }
  const query = store.query.bind(store)
  const transaction = store.transaction.bind(store)
  store.query = (sql, params, options) => {
    note(sql, params)
    return query(sql, params, options)
  }
  store.transaction = (fn, ahead) =>
    transaction(
      (tx) =>
        fn({
          ...tx,
          serialized: tx.serialized,
          query(sql, params, options) {
            note(sql, params)
            return tx.query(sql, params, options)
          },
        }),
      notingAhead(ahead, note),
    )
}

/** The statements a test process records when STATEMENT_AUDIT_FILE is set: written as JSON lines when it exits. */
const processStatements = new Map<string, RecordedStatement>()
let writeAtExit = false
export function recordForAuditFile(store: Store): void {
  const file = process.env.STATEMENT_AUDIT_FILE
  if (!file) return
  recordStatements(store, processStatements)
  if (writeAtExit) return
  writeAtExit = true
  process.on('exit', () => {
    const lines = [...processStatements.values()].map((s) => JSON.stringify({ ...s, params: s.params.map(toText) }))
    if (lines.length > 0) appendFileSync(file, `${lines.join('\n')}\n`)
  })
}

/** A parameter as text PostgreSQL reads for it (as pg sends it: arrays as array literals, objects as JSON), or null. */
function toText(v: unknown): string | null {
  if (v === null || v === undefined) return null
  if (v instanceof Date) return v.toISOString()
  if (Buffer.isBuffer(v)) return `\\x${v.toString('hex')}`
  if (Array.isArray(v)) return `{${v.map(arrayElement).join(',')}}`
  if (typeof v === 'object') return JSON.stringify(v)
  return String(v)
}

function arrayElement(v: unknown): string {
  const t = toText(v)
  if (t === null) return 'NULL'
  return Array.isArray(v) ? t : `"${t.replaceAll('\\', '\\\\').replaceAll('"', '\\"')}"`
}

/** Distinct statements of JSON lines (several processes' files appended into one), the first of each text kept. */
export function parseAuditFile(text: string): RecordedStatement[] {
  const seen = new Map<string, RecordedStatement>()
  for (const line of text.split('\n')) {
    if (!line.trim()) continue
    const s = JSON.parse(line) as RecordedStatement
    if (!seen.has(s.sql)) seen.set(s.sql, s)
  }
  return [...seen.values()]
}

const literal = (v: unknown) => {
  const t = toText(v)
  return t === null ? 'NULL' : `'${t.replaceAll("'", "''")}'`
}

interface PlanNode {
  'Node Type': string
  'Relation Name'?: string
  Plans?: PlanNode[]
}

/** Judges each statement on `db`, a database of the partitioned layout. */
export async function judgeStatements(db: Store, statements: readonly RecordedStatement[]): Promise<Judged[]> {
  const parents = new Map<string, string>()
  const keyed = new Set((await clientKeyedTables(db)).map((t) => t.name))
  for (const r of await db.query<{ child: string; parent: string }>(
    `SELECT c.relname AS child, p.relname AS parent FROM pg_inherits i
       JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_class p ON p.oid = i.inhparent`,
  ))
    parents.set(r.child, r.parent)
  const out: Judged[] = []
  for (const s of statements) out.push(await judge(db, s, keyed, parents))
  return out
}

async function judge(db: Store, s: RecordedStatement, keyed: Set<string>, parents: Map<string, string>): Promise<Judged> {
  if (!/^\s*(\(?\s*SELECT|WITH|INSERT|UPDATE|DELETE)\b/i.test(s.sql))
    return { ...s, verdict: 'not judged', unrouted: [], note: 'not a query or a data change' }
  let plan: PlanNode
  try {
    plan = await db.transaction(async (tx) => {
      await tx.query('SET LOCAL plan_cache_mode = force_generic_plan')
      // A prepared statement outlives a failed transaction: none is left from the statement before.
      await tx.exec('DEALLOCATE ALL')
      await tx.exec(`PREPARE irs_audit AS ${s.sql}`)
      const args = s.params.length > 0 ? `(${s.params.map(literal).join(', ')})` : ''
      const rows = await tx.query<{ 'QUERY PLAN': [{ Plan: PlanNode }] }>(`EXPLAIN (FORMAT JSON) EXECUTE irs_audit${args}`)
      await tx.exec('DEALLOCATE irs_audit')
      const first = rows[0]?.['QUERY PLAN']
      const parsed = (typeof first === 'string' ? JSON.parse(first) : first) as [{ Plan: PlanNode }]
      return parsed[0].Plan
    })
  } catch (err) {
    return { ...s, verdict: 'not judged', unrouted: [], note: `EXPLAIN failed: ${(err as Error).message}` }
  }
  const touched = new Set<string>()
  const unrouted = new Map<string, number>()
  const walk = (node: PlanNode) => {
    const rel = node['Relation Name']
    if (rel) {
      const table = parents.get(rel) ?? rel
      if (keyed.has(table)) touched.add(table)
    }
    if (node['Node Type'] === 'Append' || node['Node Type'] === 'Merge Append') {
      // Distinct partitions per table: a UNION's Append over two scans of one partition is still one client.
      const perParent = new Map<string, Set<string>>()
      for (const child of node.Plans ?? []) {
        const r = scanned(child)
        const parent = r && parents.get(r)
        if (parent && keyed.has(parent)) perParent.set(parent, (perParent.get(parent) ?? new Set()).add(r))
      }
      for (const [parent, parts] of perParent) if (parts.size > 1) unrouted.set(parent, Math.max(unrouted.get(parent) ?? 0, parts.size))
    }
    for (const child of node.Plans ?? []) walk(child)
  }
  walk(plan)
  if (touched.size === 0 && unrouted.size === 0) return { ...s, verdict: 'no client table', unrouted: [] }
  const list = [...unrouted].map(([table, partitions]) => ({ table, partitions })).sort((a, b) => a.table.localeCompare(b.table))
  return { ...s, verdict: list.length > 0 ? 'not routed' : 'routed', unrouted: list }
}

/** The relation a partition's subplan scans (a bitmap scan's heap node, a scan under a Result or Sort). */
function scanned(node: PlanNode): string | undefined {
  if (node['Relation Name']) return node['Relation Name']
  const only = node.Plans?.length === 1 ? node.Plans[0] : undefined
  return only ? scanned(only) : undefined
}

/** The exception a statement falls under, if any (its text compared with runs of white space made one space). */
export function exceptionFor(s: RecordedStatement, exceptions: readonly Exception[]): Exception | undefined {
  const text = oneLine(s.sql)
  return exceptions.find((e) => s.source.startsWith(`${e.source}:`) && text.includes(oneLine(e.sqlIncludes)))
}

const oneLine = (sql: string) => sql.replace(/\s+/g, ' ').trim()

/** Counts per verdict, and the not-routed statements no exception names (each with its text and source). */
export function summarize(judged: readonly Judged[], exceptions: readonly Exception[]) {
  const count = (v: Verdict) => judged.filter((j) => j.verdict === v).length
  const notRouted = judged.filter((j) => j.verdict === 'not routed')
  const unnamed = notRouted.filter((j) => !exceptionFor(j, exceptions))
  return {
    distinct: judged.length,
    routed: count('routed'),
    notRouted: notRouted.length,
    named: notRouted.length - unnamed.length,
    noClientTable: count('no client table'),
    notJudged: count('not judged'),
    unnamed,
  }
}

/** A not-routed statement as a failure shows it: source, tables and partitions, text. */
export function describe(j: Judged): string {
  const tables = j.unrouted.map((u) => `${u.table} (${u.partitions} partitions)`).join(', ')
  return `${j.source}: ${tables}\n    ${oneLine(j.sql)}`
}

export type { Queryable }
