import assert from 'node:assert/strict'
import { join, relative } from 'node:path'
import { describe, it } from 'node:test'
import {
  importEdges,
  LAYERS,
  layerOf,
  querySitesOutsideStores,
  readSources,
  type SourceFile,
  TRANSACTION_IDIOMS,
  transactionIdiomUses,
  transactionSitesOutsideIdioms,
  unitCycles,
  unitOf,
  upwardImports,
} from '../scripts/architecture.ts'

/**
 * The shape of src/ (docs/decisions.md, "The import graph"): no folder-level cycle, no import running back up the
 * layers of scripts/architecture.ts, no SQL statement sent outside a store module, and two ways to open a
 * transaction (docs/decisions.md, "The unit of work"). `npm run architecture` prints the same measures with the
 * largest functions and files per folder.
 */
const ROOT = relative(process.cwd(), join(import.meta.dirname, '..', 'src')) || 'src'
const files = readSources(ROOT)
const edges = importEdges(files, ROOT)

describe('the import graph of src/', () => {
  it('has no folder-level cycle', () => {
    assert.deepEqual(unitCycles(edges), [])
  })

  it('has no import running back up the layers', () => {
    const up = upwardImports(edges).map((e) => `${e.from} -> ${e.to} (${e.fromUnit} -> ${e.toUnit})`)
    assert.deepEqual(up, [])
  })

  it('places every unit that is not a resource family in a named layer', () => {
    // A new top-level folder would otherwise count as a family and slip between the layers unnoticed.
    const named = new Set(LAYERS.flat())
    const unplaced = [...new Set(files.map((f) => unitOf(f.path, ROOT)))].filter((u) => !u.startsWith('resources/') && !named.has(u))
    assert.deepEqual(unplaced, [])
  })

  it('sends SQL only from store modules (store.ts, *-store.ts, src/store/)', () => {
    const sites = querySitesOutsideStores(files).map((s) => `${s.path}:${s.line}`)
    assert.deepEqual(sites, [])
  })
})

describe('the payment-provider seam', () => {
  it("names Stripe ('stripe') only in its own folder and in the operator's configuration of it", () => {
    // Everything else goes through the provider interface (payments/provider.ts): a second provider is a new folder.
    const allowed = [
      `${ROOT}/resources/payments/stripe/`,
      `${ROOT}/admin/payment-provider-`,
      // The operator's `inbound provider set`, which sends `{provider: "stripe", ...}`.
      `${ROOT}/cli/inbound.ts`,
    ]
    const sites: string[] = []
    for (const file of files) {
      if (allowed.some((prefix) => file.path.startsWith(prefix))) continue
      file.text.split('\n').forEach((line, i) => {
        if (/(['"`])stripe\1/.test(line)) sites.push(`${file.path}:${i + 1}`)
      })
    }
    assert.deepEqual(sites, [])
  })
})

describe('the transactions of src/', () => {
  it('are opened only in src/store/, in executeWrite (requests) and in inUnitOfWork (everything else)', () => {
    // `.transaction(`, `inRequestTransaction(` and `new UnitOfWork(` anywhere else is a third idiom.
    const sites = transactionSitesOutsideIdioms(files, ROOT).map((s) => `${s.path}:${s.line} ${s.what}`)
    assert.deepEqual(sites, [])
  })

  it('has both idioms in use', () => {
    const uses = transactionIdiomUses(files)
    for (const idiom of TRANSACTION_IDIOMS) assert.ok((uses.get(idiom.name) ?? 0) > 0, `${idiom.name} has no caller`)
  })
})

describe('the checks themselves', () => {
  const src = (path: string, text: string): SourceFile => ({ path: `fake/${path}`, text })

  it('finds a cycle between two families, type-only imports included', () => {
    const fake = [
      src('resources/a/service.ts', "import type { B } from '../b/store.ts'\n"),
      src('resources/b/store.ts', "import { a } from '../a/service.ts'\n"),
    ]
    assert.deepEqual(unitCycles(importEdges(fake, 'fake')), [['resources/a', 'resources/b']])
  })

  it('finds an import from a lower layer into a higher one', () => {
    const fake = [src('http/route.ts', "import type { Grant } from '../resources/receivables/service.ts'\n")]
    const up = upwardImports(importEdges(fake, 'fake'))
    assert.equal(up.length, 1)
    assert.ok(layerOf('http') < layerOf('resources/receivables'))
  })

  it('finds a typed statement in a service and leaves stores and comments alone', () => {
    const fake = [
      src('admin/service.ts', 'const rows = await tx.query<Row>(\n  `SELECT 1`,\n)\n// db.query(x) in a comment\n'),
      src('admin/store.ts', "await db.query('SELECT 1')\n"),
      src('resources/holds/client-facts-store.ts', "await tx.query('SELECT 1')\n"),
      src('store/locks.ts', "await tx.query('SELECT 1')\n"),
    ]
    assert.deepEqual(querySitesOutsideStores(fake), [{ path: 'fake/admin/service.ts', line: 1 }])
  })

  it('finds a transaction or a unit of work opened outside the two idioms, and leaves theirs and src/store/ alone', () => {
    const fake = [
      src(
        'admin/service.ts',
        'await store.transaction(async (tx) => new UnitOfWork(tx))\n// store.transaction( in a comment\nawait deps.store.transaction((tx) => f(tx))\n',
      ),
      src(
        'resources/operations.ts',
        'export async function executeWrite() {\n  return inRequestTransaction(store, slot, async (tx) => new UnitOfWork(tx))\n}\nfunction other() {\n  return inRequestTransaction(store, slot, f)\n}\n',
      ),
      src(
        'resources/unit-of-work.ts',
        'export async function inUnitOfWork() {\n  return store.transaction(async (tx) => { const uow = new UnitOfWork(tx) })\n}\nconst x = () => store.transaction(f)\n',
      ),
      src('resources/payments/service.ts', 'function executeWrite() {\n  return store.transaction(f)\n}\nawait inUnitOfWork(store, f)\n'),
      src('store/transactions.ts', 'export function inRequestTransaction() {\n  return store.transaction(f)\n}\n'),
    ]
    assert.deepEqual(
      transactionSitesOutsideIdioms(fake, 'fake').map((s) => `${s.path}:${s.line} ${s.what}`),
      [
        'fake/admin/service.ts:1 .transaction(',
        'fake/admin/service.ts:1 new UnitOfWork(',
        'fake/admin/service.ts:3 .transaction(',
        'fake/resources/operations.ts:5 inRequestTransaction(',
        'fake/resources/unit-of-work.ts:4 .transaction(',
        'fake/resources/payments/service.ts:2 .transaction(',
      ],
    )
    assert.deepEqual(
      [...transactionIdiomUses(fake)],
      [
        ['executeWrite', 0],
        ['inUnitOfWork', 1],
      ],
    )
  })
})
