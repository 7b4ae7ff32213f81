import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { test } from 'node:test'
import { GATE_TABLES } from '../../src/store/citus.ts'

/**
 * Issue 37, item 2: the request gate's per-request writes are routed (docs/scaling.md, "The request gate"). On Citus
 * rate_limit_windows and inflight_requests are distributed by `bucket`, so every statement on them names one bucket:
 * a WHERE with `bucket = <one value>`, or an INSERT of one row. The statements inside request_gate() are PL/pgSQL,
 * which the statement audit (EXPLAIN) cannot see into; this reads them from their source instead.
 */
const SOURCES = ['src/store/migrations/definitions/03_request_gate.sql', 'src/store/gate-store.ts']

/** Across buckets on purpose, not on a request's path (docs/scaling.md names them). */
const ACROSS_BUCKETS = [
  "DELETE FROM rate_limit_windows WHERE window_start < now() - interval '5 minutes'",
  "DELETE FROM inflight_requests WHERE expires_at < now() - interval '5 minutes'",
  'DELETE FROM inflight_requests WHERE holder = $1',
]

/** Every statement of `text` (SQL, or SQL in a TypeScript file's strings) that names one of the gate's tables. */
function gateStatements(text: string): string[] {
  const noComments = text.replace(/--[^\n]*/g, '').replace(/\/\/[^\n]*/g, '')
  const tables = new RegExp(`\\b(${GATE_TABLES.join('|')})\\b`)
  return noComments
    .split(/;|['`]\s*[,)]/)
    .map((s) => s.replace(/\s+/g, ' ').trim())
    .filter((s) => /\b(SELECT|INSERT|UPDATE|DELETE)\b/.test(s) && tables.test(s))
    .map((s) => s.slice(s.search(/\b(SELECT|INSERT|UPDATE|DELETE)\b/)))
}

test('every statement on the request gate’s tables names one bucket, but the named maintenance ones', () => {
  const found = SOURCES.flatMap((f) => gateStatements(readFileSync(f, 'utf8')).map((sql) => ({ f, sql })))
  assert.ok(found.length >= 7, `${found.length} statements found`)
  const across = found.filter(({ sql }) => ACROSS_BUCKETS.some((a) => sql.includes(a)))
  assert.deepEqual(across.map(({ sql }) => ACROSS_BUCKETS.find((a) => sql.includes(a))).sort(), [...ACROSS_BUCKETS].sort())
  for (const { f, sql } of found) {
    if (across.some((a) => a.sql === sql)) continue
    const oneBucket =
      /\bbucket = (p_bucket|b|d|\$1)\b/.test(sql) || /^INSERT INTO \w+ AS \w+ \(bucket, [^)]*\) VALUES \((p_bucket|b),/.test(sql)
    assert.ok(oneBucket, `${f}: ${sql}`)
    assert.doesNotMatch(sql, /bucket = ANY/, `${f}: ${sql}`)
  }
})
