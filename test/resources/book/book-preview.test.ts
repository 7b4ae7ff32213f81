import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { SCOPES } from '../../../src/domain/scopes.ts'
import { problemCode, type Response, startTestApp, type Tenant, type TestApp } from '../../helpers/app.ts'
import { type CountingStore, countingStore } from '../../helpers/counting-store.ts'
import { batchReceivable } from '../../helpers/receivables.ts'
import { createTestDatabase, onPostgres, type TestDatabase } from '../../helpers/store.ts'

/**
 * Previewing a complete book (docs/decisions.md, "Previewing a complete book"): POST .../book-completions/preview
 * answers what the declaration would flag and release, with the declaration's own refusals, and writes nothing
 * (every statement it runs is a read; the database is unchanged). The declaration made next flags and releases
 * exactly what was previewed: the two share one plan (src/resources/book/store.ts, DECLARATION_PLAN).
 */

let now = new Date('2026-11-23T09:00:00.000Z')
const clock = { now: () => now }
const later = () => {
  now = new Date(now.getTime() + 60_000)
  return now.toISOString()
}
let db: TestDatabase
let counting: CountingStore
let t: TestApp
before(async () => {
  db = await createTestDatabase()
  counting = countingStore(db.store)
  t = await startTestApp({}, { clock, db: { ...db, store: counting } })
})
after(async () => {
  await t.close()
  await db.drop()
})

const customer = { type: 'person', name: { firstName: 'Ada', lastName: 'P' }, sourceReference: 'ref/1' }
const receivable = (sourceRevision = 1) => batchReceivable('cust-1', sourceRevision)
const rec = (id: string, sourceRevision = 2) => ({ recordId: id, kind: 'receivable', externalId: id, body: receivable(sourceRevision) })
const errors = (res: Response) => res.json.errors.map((e: { code: string; pointer: string }) => [e.code, e.pointer])

async function tenant(code: string): Promise<Tenant> {
  const k = await t.tenant(code)
  assert.equal((await t.call('PUT', `/v1/clients/${code}/customers/cust-1`, { key: k.apiKey, body: customer })).status, 201)
  return k
}

function client(k: Tenant) {
  const call = (m: 'PUT' | 'GET' | 'POST', p: string, body?: unknown) =>
    t.call(m, `/v1/clients/${k.clientCode}${p}`, { key: k.apiKey, ...(body !== undefined ? { body } : {}) })
  return {
    call,
    async receivable(id: string) {
      assert.equal((await call('PUT', `/receivables/${id}`, receivable())).status, 201)
    },
    async batch(id: string, records: unknown[]) {
      assert.equal((await call('PUT', `/batches/${id}`, { records })).status, 202)
    },
    preview: (body: unknown) => call('POST', '/book-completions/preview', body),
    declare: (id: string, body: unknown) => call('PUT', `/book-completions/${id}`, body),
  }
}

/** Everything a declaration writes or changes, for "the database is unchanged". */
async function bookState(clientCode: string) {
  const q = (sql: string) => db.store.query(sql, [clientCode])
  return {
    completions: await q('SELECT * FROM book_completions WHERE client_code = $1 ORDER BY external_completion_id'),
    omissions: await q('SELECT * FROM book_omissions WHERE client_code = $1 ORDER BY external_completion_id, external_receivable_id'),
    receivables: await q(
      'SELECT external_receivable_id, revision::int AS revision, status FROM receivables WHERE client_code = $1 ORDER BY 1',
    ),
    events: await q('SELECT count(*)::int AS n, max(seq)::int AS last FROM change_events WHERE client_code = $1'),
    activity: await q('SELECT * FROM source_activity WHERE client_code = $1'),
  }
}

/** Each statement of a preview request, named. */
function statementName(sql: string): string {
  if (/^SELECT \* FROM request_gate\(/.test(sql)) return 'gate (PostgreSQL: key, grant, limits, slot)'
  if (/^SELECT k\.api_key_id/.test(sql)) return 'key and grant (embedded store)'
  if (/^DELETE FROM inflight_requests /.test(sql)) return "slot release (PostgreSQL: the request's own concurrency slot)"
  if (/^SELECT frozen_at FROM sandbox_clocks /.test(sql)) return 'sandbox clock'
  if (/^SELECT external_batch_id, status FROM batches /.test(sql)) return 'batch statuses'
  if (/^SELECT max\(source_position\)/.test(sql)) return 'last declared position'
  if (/^WITH covered AS \(/.test(sql) && !/\b(INSERT|UPDATE|DELETE)\b/.test(sql)) return 'the plan'
  return sql
}

/**
 * Pinned: the statements of one preview, by name. Beside the request's own admission (the gate and, on
 * PostgreSQL, the release of its concurrency slots, one statement per bucket: the key's and the sandbox client's), three reads: the listed batches' statuses, the last declared
 * position, and the plan. No transaction, no other write, and the database is unchanged.
 */
async function previewReadsOnly(
  clientCode: string,
  send: () => Promise<Response>,
  /** How many of the three reads run: fewer when a check refuses (a schema refusal runs none). */
  readsRun = 3,
): Promise<{ res: Response; statements: string[] }> {
  const before = await bookState(clientCode)
  counting.reset()
  const res = await send()
  const statements = counting.outside.map(statementName)
  assert.deepEqual(counting.inTransactions, [], 'no transaction is opened')
  // The sandbox clock is read once the body is valid (a schema refusal reads nothing more).
  const admission = [
    onPostgres ? 'gate (PostgreSQL: key, grant, limits, slot)' : 'key and grant (embedded store)',
    ...(readsRun > 0 ? ['sandbox clock'] : []),
  ]
  const reads = ['batch statuses', 'last declared position', 'the plan'].slice(0, readsRun)
  // One release per bucket (src/store/gate-store.ts releaseSlots): the key's and, in sandbox, the client's.
  const release = onPostgres ? Array(2).fill("slot release (PostgreSQL: the request's own concurrency slot)") : []
  assert.deepEqual(statements, [...admission, ...reads, ...release])
  assert.deepEqual(await bookState(clientCode), before, 'the database is unchanged')
  return { res, statements }
}

describe('previewing a complete book', () => {
  test('what the declaration would flag and release, changing nothing; the declaration then does exactly that', async () => {
    const k = await tenant('pv-1')
    const c = client(k)
    for (const id of ['a', 'b', 'c', 'd', 'p', 'x']) await c.receivable(id)
    assert.equal(
      (await c.call('POST', '/receivables/p/pause', { effectiveAt: '2026-01-01T00:00:00Z', reason: 'hardship_review' })).status,
      200,
    )
    assert.equal((await c.call('POST', '/receivables/x/close', { effectiveAt: '2026-01-01T00:00:00Z', reason: 'settled' })).status, 200)
    await c.batch('b1', [rec('a'), { ...rec('ghost'), body: batchReceivable('nobody', 1) }])
    await c.batch('b2', [rec('b')])
    await t.app.batchRunner.drain()
    // d1 names b1 only: b, c, d and p are flagged (a is covered, x closed, ghost never written).
    later()
    assert.equal((await c.declare('d1', { asOf: '2026-11-23T00:00:00Z', sourcePosition: 10, batches: ['b1'] })).status, 201)
    await c.receivable('f')
    const body = { asOf: '2026-11-23T01:00:00Z', sourcePosition: 11, batches: ['b1', 'b2'] }
    const { res } = await previewReadsOnly('pv-1', () => c.preview(body))
    assert.equal(res.status, 200, res.body)
    assert.deepEqual(res.json, {
      asOf: '2026-11-23T01:00:00Z',
      batches: ['b1', 'b2'],
      coveredReceivableCount: 2,
      omissions: [
        { externalReceivableId: 'c', newlyHeld: false },
        { externalReceivableId: 'd', newlyHeld: false },
        { externalReceivableId: 'f', newlyHeld: true },
        { externalReceivableId: 'p', newlyHeld: false },
      ],
      omissionsTruncated: false,
      omittedReceivableCount: 4,
      releases: [{ externalReceivableId: 'b' }],
      releasesTruncated: false,
      releasedReceivableCount: 1,
      scope: 'all_receivables',
      sourcePosition: 11,
    })
    // The declaration made now does exactly what was previewed.
    const revisions = async () =>
      Object.fromEntries(
        await Promise.all(['b', 'c', 'd', 'f', 'p'].map(async (id) => [id, (await c.call('GET', `/receivables/${id}`)).json.revision])),
      )
    const before = await revisions()
    const at = later()
    const declared = await c.declare('d2', body)
    assert.equal(declared.status, 201, declared.body)
    assert.deepEqual(
      declared.json.omissions.map((o: { externalReceivableId: string }) => o.externalReceivableId),
      res.json.omissions.map((o: { externalReceivableId: string }) => o.externalReceivableId),
    )
    assert.deepEqual(
      [declared.json.omittedReceivableCount, declared.json.coveredReceivableCount, declared.json.omissionsTruncated],
      [4, 2, false],
    )
    // b is released: d1 shows its omission released, its holds lose other_protection, and it has a new revision;
    // f is newly held (a new revision); c, d (already flagged) and p (paused) keep their holds and revisions.
    const d1 = (await c.call('GET', '/book-completions/d1')).json.omissions
    assert.deepEqual(
      d1.map((o: { externalReceivableId: string; state: string }) => [o.externalReceivableId, o.state]),
      [
        ['b', 'released'],
        ['c', 'held'],
        ['d', 'held'],
        ['p', 'held'],
      ],
    )
    const released = await db.store.query<{ released_at: string }>(
      `SELECT released_at FROM book_omissions WHERE client_code = 'pv-1' AND external_receivable_id = 'b'`,
    )
    assert.deepEqual(
      released.map((r) => new Date(r.released_at).toISOString()),
      [at],
    )
    assert.ok(!(await c.call('GET', '/receivables/b')).json.recovery.holds.includes('other_protection'))
    assert.ok((await c.call('GET', '/receivables/f')).json.recovery.holds.includes('other_protection'))
    const after = await revisions()
    assert.deepEqual(after, { ...before, b: before.b + 1, f: before.f + 1 })

    // The same body again: the declaration it previews is now stale, and the preview says so as the PUT does.
    for (const send of [async () => (await previewReadsOnly('pv-1', () => c.preview(body), 2)).res, () => c.declare('d3', body)]) {
      const stale = await send()
      assert.equal(stale.status, 409, stale.body)
      assert.equal(problemCode(stale), 'stale_source_position')
      assert.equal(stale.json.lastSourcePosition, 11)
    }
  })

  test("the declaration's refusals, each changing nothing; the scope is receivables:read", async () => {
    const k = await tenant('pv-2')
    const c = client(k)
    await c.receivable('a')
    await c.batch('queued', [rec('a')])
    const base = { asOf: '2026-11-23T00:00:00Z', sourcePosition: 1 }
    const { res: early } = await previewReadsOnly('pv-2', () => c.preview({ ...base, batches: ['queued'] }), 1)
    assert.equal(early.status, 409)
    assert.equal(problemCode(early), 'batches_not_finished')
    assert.deepEqual(early.json.unfinishedBatches, ['queued'])
    const cases: [string, unknown, [string, string][], number][] = [
      ['an unknown batch', { ...base, batches: ['queued', 'ghost'] }, [['unknown_reference', '/batches/1']], 1],
      ['no batch', { ...base, batches: [] }, [['too_small', '/batches']], 0],
      ['51 batches', { ...base, batches: Array.from({ length: 51 }, (_, i) => `b${i}`) }, [['too_big', '/batches']], 0],
      ['a batch twice', { ...base, batches: ['queued', 'queued'] }, [['custom', '/batches/1']], 0],
      ['a date for asOf', { ...base, asOf: '2026-11-23', batches: ['queued'] }, [['invalid_format', '/asOf']], 0],
      ['no sourcePosition', { asOf: base.asOf, batches: ['queued'] }, [['invalid_type', '/sourcePosition']], 0],
      ['an unknown key', { ...base, batches: ['queued'], note: 'x' }, [['unrecognized_keys', '/note']], 0],
    ]
    for (const [what, body, expected, readsRun] of cases) {
      const { res } = await previewReadsOnly('pv-2', () => c.preview(body), readsRun)
      assert.equal(res.status, 422, `${what}: ${res.body}`)
      assert.deepEqual(errors(res), expected, what)
    }
    await t.app.batchRunner.drain()
    const reader = await t.tenant('pv-2', { integrationId: 'int-pv-2-reader', scopes: ['receivables:read'] })
    const ok = await t.call('POST', '/v1/clients/pv-2/book-completions/preview', {
      key: reader.apiKey,
      body: { ...base, batches: ['queued'] },
    })
    assert.equal(ok.status, 200, ok.body)
    const writer = await t.tenant('pv-2', { integrationId: 'int-pv-2-writer', scopes: SCOPES.filter((s) => s !== 'receivables:read') })
    const refused = await t.call('POST', '/v1/clients/pv-2/book-completions/preview', {
      key: writer.apiKey,
      body: { ...base, batches: ['queued'] },
    })
    assert.equal(refused.status, 403)
    assert.equal(problemCode(refused), 'client_scope_denied')
  })

  test('the limits: 50 batches; 100 omissions shown of 103, truncated, the exact count; 100 releases of 102', async () => {
    const k = await tenant('pv-3')
    const c = client(k)
    const pad = (n: number) => String(n).padStart(3, '0')
    // r-000..r-101 written by two batches; 48 more batches of one Receivable each; o-000..o-102 written alone.
    await c.batch(
      'big-0',
      Array.from({ length: 100 }, (_, i) => rec(`r-${pad(i)}`, 1)),
    )
    await c.batch('big-1', [rec('r-100', 1), rec('r-101', 1)])
    const small = Array.from({ length: 48 }, (_, i) => `small-${i + 2}`)
    for (const [i, id] of small.entries()) await c.batch(id, [rec(`s-${pad(i)}`, 1)])
    for (let i = 0; i < 103; i++) await c.receivable(`o-${pad(i)}`)
    await t.app.batchRunner.drain()
    // d1 names the small batches: it flags the 102 r- and the 103 o- Receivables.
    later()
    const d1 = await c.declare('d1', { asOf: '2026-11-23T00:00:00Z', sourcePosition: 1, batches: small })
    assert.deepEqual([d1.json.omittedReceivableCount, d1.json.omissionsTruncated, d1.json.omissions.length], [205, true, 100])
    const body = { asOf: '2026-11-23T01:00:00Z', sourcePosition: 2, batches: ['big-0', 'big-1', ...small] }
    assert.equal(body.batches.length, 50)
    const { res } = await previewReadsOnly('pv-3', () => c.preview(body))
    assert.equal(res.status, 200, res.body)
    const ids = (list: { externalReceivableId: string }[]) => list.map((o) => o.externalReceivableId)
    assert.deepEqual(
      [res.json.coveredReceivableCount, res.json.omittedReceivableCount, res.json.omissionsTruncated, res.json.omissions.length],
      [150, 103, true, 100],
    )
    assert.deepEqual(
      ids(res.json.omissions),
      Array.from({ length: 100 }, (_, i) => `o-${pad(i)}`),
    )
    assert.ok(res.json.omissions.every((o: { newlyHeld: boolean }) => o.newlyHeld === false))
    assert.deepEqual([res.json.releasedReceivableCount, res.json.releasesTruncated, res.json.releases.length], [102, true, 100])
    assert.deepEqual(
      ids(res.json.releases),
      Array.from({ length: 100 }, (_, i) => `r-${pad(i)}`),
    )
    const at = later()
    const declared = await c.declare('d2', body)
    assert.equal(declared.status, 201, declared.body)
    assert.deepEqual(ids(declared.json.omissions), ids(res.json.omissions))
    assert.deepEqual(
      [declared.json.omittedReceivableCount, declared.json.omissionsTruncated, declared.json.coveredReceivableCount],
      [103, true, 150],
    )
    const releasedNow = await db.store.query<{ id: string }>(
      `SELECT DISTINCT external_receivable_id AS id FROM book_omissions WHERE client_code = 'pv-3' AND released_at = $1 ORDER BY 1`,
      [at],
    )
    assert.deepEqual(
      releasedNow.map((r) => r.id),
      Array.from({ length: 102 }, (_, i) => `r-${pad(i)}`),
    )
  })
})
