import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import {
  describe as describeStatement,
  exceptionFor,
  judgeStatements,
  parseAuditFile,
  type RecordedStatement,
  senderOf,
  summarize,
} from '../helpers/statement-audit.ts'
import { createTestDatabase, engineName, type TestDatabase } from '../helpers/store.ts'
import { EXCEPTIONS } from './statement-audit-exceptions.ts'

/**
 * Issue 37, item 4: every distinct statement the service sends during a broad workload, judged with EXPLAIN on
 * the partitioned layout (test/helpers/statement-audit.ts): each one touching a client-keyed table is planned
 * against one partition of it, or is a named exception (statement-audit-exceptions.ts, docs/scaling.md). CI
 * audits the whole suite's statements the same way (scripts/statement-audit.ts after the partitioned run).
 */

/** The workload: test files that drive every route family, the workers, the sandbox clocks and the operator's reads. */
const WORKLOAD = [
  'test/api/examples.test.ts',
  'test/sandbox/sandbox-clock.test.ts',
  'test/workers/client-fanout.test.ts',
  'test/workers/receipt-dispatcher.test.ts',
]

let db: TestDatabase
let dir: string
before(async () => {
  db = await createTestDatabase({ layout: 'partitioned' })
  dir = mkdtempSync(join(tmpdir(), 'irs-audit-'))
})
after(async () => {
  await db.drop()
  rmSync(dir, { recursive: true, force: true })
})

/** Runs test files in a child process on the partitioned layout, recording the statements; resolves its exit code. */
function runRecorded(files: readonly string[], file: string): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    // Without the test runner's NODE_TEST_CONTEXT, which would make the child report to this run instead of running its files.
    const { NODE_TEST_CONTEXT: _, ...env } = process.env
    const child = spawn(process.execPath, ['--no-wasm-code-gc', '--import', 'tsx', '--test', '--test-concurrency=1', ...files], {
      env: { ...env, STATEMENT_AUDIT_FILE: file, DATABASE_LAYOUT: 'partitioned' },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let output = ''
    child.stdout.on('data', (d) => {
      output += d
    })
    child.stderr.on('data', (d) => {
      output += d
    })
    child.on('error', reject)
    child.on('close', (code) => resolve({ code, output }))
  })
}

/**
 * The workload's verdict is the partitioned layout's, whatever the store or Node line the suite runs on (the test makes
 * its own partitioned database): CI, which runs the suite three times, asks for it once, on its partitioned
 * PostgreSQL stage, and skips it on the other two (CI_STATEMENT_AUDIT_ONCE=skip in .ci/run; 4 minutes of the
 * embedded run). `npm test` anywhere else runs it.
 */
const workloadSkip =
  process.env.CI_STATEMENT_AUDIT_ONCE === 'skip' ? 'CI audits the workload once, on its partitioned PostgreSQL stage (.ci/run)' : false

describe(`the statement audit (${engineName})`, () => {
  test('every statement of the workload on a client-keyed table is routed to one client, or a named exception', {
    skip: workloadSkip,
  }, async (t) => {
    const file = join(dir, 'statements.jsonl')
    const run = await runRecorded(WORKLOAD, file)
    assert.equal(run.code, 0, `the workload passes on the partitioned layout:\n${run.output.slice(-4000)}`)
    const statements = parseAuditFile(readFileSync(file, 'utf8'))
    assert.ok(statements.length > 100, `${statements.length} distinct statements recorded`)
    const judged = await judgeStatements(db.store, statements)
    const s = summarize(judged, EXCEPTIONS)
    t.diagnostic(
      `${s.distinct} distinct: ${s.routed} routed, ${s.notRouted} not routed (${s.named} named), ${s.noClientTable} on no client-keyed table, ${s.notJudged} not judged`,
    )
    assert.deepEqual(
      s.unnamed.map(describeStatement),
      [],
      'a statement on a client-keyed table that does not name one client (fix it, or name it with its reason)',
    )
    // Every statement EXPLAIN could not take is one that reads or writes no data (a lock, a SET).
    for (const j of judged.filter((x) => x.verdict === 'not judged')) assert.match(j.note ?? '', /^not a query/, describeStatement(j))
    assert.ok(s.routed > s.notRouted * 5, `${s.routed} routed`)
  })

  test('a statement not narrowed to one client fails with its text and its source; one that names its client passes', async () => {
    const statements: RecordedStatement[] = [
      { sql: 'SELECT * FROM receivables WHERE status = $1', params: ['active'], source: 'src/example/store.ts:12' },
      {
        sql: 'SELECT * FROM receivables WHERE client_code = $1 AND status = $2',
        params: ['c1', 'active'],
        source: 'src/example/store.ts:20',
      },
      {
        sql: `UPDATE webhook_deliveries SET status = 'failed' WHERE next_attempt_at < $1`,
        params: ['2026-01-01T00:00:00Z'],
        source: 'src/example/store.ts:30',
      },
      {
        sql: 'SELECT r.* FROM receivables r JOIN customers c ON c.client_code = r.client_code WHERE r.client_code = $1',
        params: ['c1'],
        source: 'src/example/store.ts:40',
      },
      // The join's second table is narrowed only through the first: a generic plan cannot prune it, nor can Citus route it.
      {
        sql: `SELECT r.* FROM receivables r JOIN receivable_customers c ON c.client_code = r.client_code
               AND c.external_receivable_id = r.external_receivable_id WHERE r.external_receivable_id = $1`,
        params: ['r1'],
        source: 'src/example/store.ts:50',
      },
      {
        sql: 'INSERT INTO clients (client_code, name, created_at, updated_at) VALUES ($1, $2, $3, $3)',
        params: ['c1', 'n', '2026-01-01T00:00:00Z'],
        source: 'src/example/store.ts:60',
      },
      { sql: 'SELECT api_key_id FROM api_keys WHERE digest = $1', params: ['d'], source: 'src/example/store.ts:70' },
      // Two scans of one client's partition under a UNION's Append: one partition, routed.
      {
        sql: `(SELECT delivery_id FROM webhook_deliveries WHERE client_code = $1 AND status = 'pending' LIMIT 5)
              UNION (SELECT delivery_id FROM webhook_deliveries WHERE client_code = $1 AND type = 'ping' LIMIT 5)`,
        params: ['c1'],
        source: 'src/example/store.ts:75',
      },
      { sql: 'SELECT pg_advisory_xact_lock(1)', params: [], source: 'src/example/store.ts:80' },
    ]
    const judged = await judgeStatements(db.store, statements)
    assert.deepEqual(
      judged.map((j) => [j.source.split(':')[1], j.verdict, j.unrouted]),
      [
        ['12', 'not routed', [{ table: 'receivables', partitions: 8 }]],
        ['20', 'routed', []],
        ['30', 'not routed', [{ table: 'webhook_deliveries', partitions: 8 }]],
        ['40', 'routed', []],
        [
          '50',
          'not routed',
          [
            { table: 'receivable_customers', partitions: 8 },
            { table: 'receivables', partitions: 8 },
          ],
        ],
        ['60', 'routed', []],
        ['70', 'no client table', []],
        ['75', 'routed', []],
        ['80', 'no client table', []],
      ],
    )
    const named = [{ name: 'example', source: 'src/example/store.ts', sqlIncludes: 'UPDATE webhook_deliveries', reason: 'an example' }]
    const s = summarize(judged, named)
    assert.deepEqual([s.routed, s.notRouted, s.named, s.noClientTable, s.notJudged], [4, 3, 1, 2, 0])
    assert.equal(exceptionFor(statements[2] as RecordedStatement, named)?.name, 'example')
    assert.deepEqual(s.unnamed.map(describeStatement), [
      'src/example/store.ts:12: receivables (8 partitions)\n    SELECT * FROM receivables WHERE status = $1',
      'src/example/store.ts:50: receivable_customers (8 partitions), receivables (8 partitions)\n' +
        '    SELECT r.* FROM receivables r JOIN receivable_customers c ON c.client_code = r.client_code AND c.external_receivable_id = r.external_receivable_id WHERE r.external_receivable_id = $1',
    ])
  })

  test('every named exception is in docs/scaling.md with its source and reason', () => {
    const doc = readFileSync(new URL('../../docs/scaling.md', import.meta.url), 'utf8')
    for (const e of EXCEPTIONS) assert.ok(doc.includes(`| ${e.name} | \`${e.source}\` | ${e.reason} |`), e.name)
    assert.equal(new Set(EXCEPTIONS.map((e) => e.name)).size, EXCEPTIONS.length)
  })

  test('a statement EXPLAIN cannot take is reported, not passed over', async () => {
    const [j] = await judgeStatements(db.store, [
      { sql: 'SELECT * FROM no_such_table WHERE client_code = $1', params: ['c'], source: 'src/x.ts:1' },
    ])
    assert.equal(j?.verdict, 'not judged')
    assert.match(j?.note ?? '', /EXPLAIN failed: .*no_such_table/)
  })

  test("a statement's source is the first frame in src/ after the stores' plumbing; a test's own statement has none", () => {
    const root = new URL('../../', import.meta.url).pathname
    const stack = [
      'Error',
      `    at note (${root}test/helpers/statement-audit.ts:60:20)`,
      `    at Object.query (${root}src/store/postgres.ts:150:10)`,
      `    at findThing (${root}src/resources/things/store.ts:42:7)`,
      `    at service (${root}src/resources/things/service.ts:9:3)`,
    ].join('\n')
    assert.equal(senderOf(stack), 'src/resources/things/store.ts:42')
    assert.equal(senderOf(`Error\n    at file://${root}src/workers/retention.ts:7:1`), 'src/workers/retention.ts:7')
    assert.equal(senderOf(`Error\n    at t (${root}test/store/x.test.ts:3:3)`), '')
  })
})
