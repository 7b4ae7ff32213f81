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
  unitCycles,
  unitOf,
  upwardImports,
} from '../scripts/architecture.ts'

/**
 * The shape of src/ (docs/decisions.md, "The import graph"): no folder-level cycle, no import running back up the
 * layers of scripts/architecture.ts, and no SQL statement sent outside a store module. `npm run architecture`
 * prints the same measures with the largest functions and files per folder.
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
})
