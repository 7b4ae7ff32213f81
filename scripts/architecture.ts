/**
 * The shape of src/, measured: the folder-level import graph with its cycles, the imports that run back up the
 * layers, the value imports from one resource family into another, SQL call sites outside store modules, the ways
 * a transaction is opened, the units without a test folder, files per folder and the largest functions. `npm run
 * architecture` prints the report; test/architecture.test.ts holds the tree to the rules it checks.
 *
 * A "unit" is a folder of src/ (a resource family counts as its own unit: `resources/receivables`); files at
 * src/'s top are the wiring roots. Layers, bottom first: what a unit may import is its own layer or below.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs'
import { dirname, join, relative, resolve } from 'node:path'
import ts from 'typescript'

export interface SourceFile {
  path: string
  text: string
}

export function readSources(root = 'src'): SourceFile[] {
  const out: SourceFile[] = []
  const walk = (d: string) => {
    for (const f of readdirSync(d).sort()) {
      const p = join(d, f)
      if (statSync(p).isDirectory()) walk(p)
      else if (p.endsWith('.ts')) out.push({ path: p, text: readFileSync(p, 'utf8') })
    }
  }
  walk(root)
  return out
}

/** The unit a file belongs to: `resources/<family>` for a family's files, else its top folder, `root` at the top. */
export function unitOf(path: string, root = 'src'): string {
  const parts = relative(root, path).split('/')
  if (parts.length === 1) return parts[0] === 'config.ts' ? 'config' : 'root'
  if (parts[0] === 'resources' && parts.length > 2) return `resources/${parts[1]}`
  return parts[0] as string
}

export interface ImportEdge {
  from: string
  to: string
  fromUnit: string
  toUnit: string
  typeOnly: boolean
}

/** `import type { A }`, or `import { type A, type B }`: erased at compile time, no module is loaded. */
function importIsTypeOnly(st: ts.ImportDeclaration): boolean {
  const clause = st.importClause
  if (!clause) return false
  if (clause.isTypeOnly) return true
  if (clause.name) return false
  const bindings = clause.namedBindings
  return Boolean(bindings && ts.isNamedImports(bindings) && bindings.elements.length > 0 && bindings.elements.every((e) => e.isTypeOnly))
}

export function importEdges(files: readonly SourceFile[], root = 'src'): ImportEdge[] {
  const edges: ImportEdge[] = []
  for (const f of files) {
    const sf = ts.createSourceFile(f.path, f.text, ts.ScriptTarget.Latest, false)
    for (const st of sf.statements) {
      if (!(ts.isImportDeclaration(st) || ts.isExportDeclaration(st)) || !st.moduleSpecifier) continue
      const spec = (st.moduleSpecifier as ts.StringLiteral).text
      if (!spec.startsWith('.')) continue
      const to = relative(process.cwd(), resolve(dirname(f.path), spec))
      const typeOnly = ts.isImportDeclaration(st) ? importIsTypeOnly(st) : st.isTypeOnly
      edges.push({ from: f.path, to, fromUnit: unitOf(f.path, root), toUnit: unitOf(to, root), typeOnly })
    }
  }
  return edges
}

/** Strongly connected components of more than one unit: the folder-level cycles (Tarjan). */
export function unitCycles(edges: readonly ImportEdge[]): string[][] {
  const graph = new Map<string, Set<string>>()
  for (const e of edges) {
    if (e.fromUnit === e.toUnit) continue
    if (!graph.has(e.fromUnit)) graph.set(e.fromUnit, new Set())
    if (!graph.has(e.toUnit)) graph.set(e.toUnit, new Set())
    graph.get(e.fromUnit)?.add(e.toUnit)
  }
  let index = 0
  const idx = new Map<string, number>()
  const low = new Map<string, number>()
  const stack: string[] = []
  const on = new Set<string>()
  const out: string[][] = []
  const visit = (v: string) => {
    idx.set(v, index)
    low.set(v, index++)
    stack.push(v)
    on.add(v)
    for (const w of graph.get(v) ?? []) {
      if (!idx.has(w)) {
        visit(w)
        low.set(v, Math.min(low.get(v) as number, low.get(w) as number))
      } else if (on.has(w)) low.set(v, Math.min(low.get(v) as number, idx.get(w) as number))
    }
    if (low.get(v) === idx.get(v)) {
      const scc: string[] = []
      let w: string | undefined
      do {
        w = stack.pop() as string
        on.delete(w)
        scc.push(w)
      } while (w !== v)
      if (scc.length > 1) out.push(scc.sort())
    }
  }
  for (const v of [...graph.keys()].sort()) if (!idx.has(v)) visit(v)
  return out
}

/**
 * The layers, bottom first. A unit not named here is a resource family (`resources/<family>`), between the
 * shared resource modules and the layers above them.
 */
export const LAYERS: readonly (readonly string[])[] = [
  ['config', 'domain'],
  ['store'],
  // Access (keys, grants, authorization) sits below http/: the HTTP edge authenticates through it, and families
  // and workers that recheck a grant use it without reaching into http/.
  ['access'],
  // Outbound destination safety (which URLs and addresses a delivery may reach, the pinned connection): below the
  // families that check a configured URL and the delivery engine (src/workers/delivery-engine.ts) that sends.
  ['outbound'],
  ['http'],
  // The write kernel (src/resources/*.ts) and what every write flushes through its unit of work: the feed's
  // append, holds (snapshots, revision bumps, client facts, source activity), the operator audit trail.
  ['resources/feed'],
  ['resources/holds', 'resources/audit'],
  ['resources'],
  ['<family>'],
  ['sandbox', 'admin', 'workers'],
  ['root', 'cli'],
]

export function layerOf(unit: string): number {
  const i = LAYERS.findIndex((l) => l.includes(unit))
  if (i >= 0) return i
  return LAYERS.findIndex((l) => l.includes('<family>'))
}

/** Imports from a lower layer into a higher one (type-only imports count too: they are dependencies). */
export function upwardImports(edges: readonly ImportEdge[]): ImportEdge[] {
  return edges.filter((e) => e.fromUnit !== e.toUnit && layerOf(e.toUnit) > layerOf(e.fromUnit))
}

/** Whether a unit is a resource family (`resources/<family>`, in no named layer: the feed, holds and audit are below). */
export function isFamily(unit: string): boolean {
  return unit.startsWith('resources/') && !LAYERS.some((l) => l.includes(unit))
}

/**
 * Value imports from one resource family into another: a family reaching into another's module at run time rather
 * than receiving what it uses (a `Pick<>` of a store or rules, filled in src/app.ts) or sharing it from a layer
 * below. Type-only imports do not count: they load nothing.
 */
export function crossFamilyValueImports(edges: readonly ImportEdge[]): ImportEdge[] {
  return edges.filter((e) => !e.typeOnly && e.fromUnit !== e.toUnit && isFamily(e.fromUnit) && isFamily(e.toUnit))
}

/**
 * The units of src/ (its top folders and each resource family) with no test file under the same path in test/:
 * tests mirror src/ (docs/decisions.md, "Test layout").
 */
export function unitsWithoutTests(files: readonly SourceFile[], root: string, testRoot: string): string[] {
  const units = [...new Set(files.map((f) => unitOf(f.path, root)))].filter((u) => u !== 'root' && u !== 'config')
  const hasTests = (dir: string): boolean => {
    try {
      return readdirSync(dir).some((f) => f.endsWith('.test.ts') || (statSync(join(dir, f)).isDirectory() && hasTests(join(dir, f))))
    } catch {
      return false
    }
  }
  return units.filter((u) => !hasTests(join(testRoot, u))).sort()
}

/** A statement sent: `.query(` or `.query<Row>(` (a typed call counts too), or `.exec(` on a store or transaction. */
const QUERY_CALL = /\.query\s*[<(]|\b(?:tx|db|store|client)\.exec\(/

/** Statement call sites outside store modules (`store.ts` and `*-store.ts` files, and src/store/). */
export function querySitesOutsideStores(files: readonly SourceFile[]): { path: string; line: number }[] {
  const out: { path: string; line: number }[] = []
  for (const f of files) {
    if (f.path.endsWith('/store.ts') || f.path.includes('/store/') || /-store\.ts$/.test(f.path)) continue
    f.text.split('\n').forEach((l, i) => {
      if (QUERY_CALL.test(l) && !/^\s*(\*|\/\/)/.test(l)) out.push({ path: f.path, line: i + 1 })
    })
  }
  return out
}

/**
 * The two ways to open a transaction outside src/store/ (docs/decisions.md, "The unit of work"): a request's write
 * (`executeWrite`) and every other transaction (`inUnitOfWork`: workers, sweepers, operator actions, the seed).
 * Each is a function of the file named; only its body opens a transaction or makes a unit of work.
 */
export const TRANSACTION_IDIOMS = [
  { name: 'executeWrite', path: 'resources/operations.ts', for: 'requests' },
  { name: 'inUnitOfWork', path: 'resources/unit-of-work.ts', for: 'workers, operators' },
] as const

export interface TransactionSite {
  path: string
  line: number
  /** `.transaction(`, `inRequestTransaction(` or `new UnitOfWork(`. */
  what: string
}

/** Every opening of a transaction or of a unit of work, with the top-level function it is in. */
function transactionOpenings(files: readonly SourceFile[], root: string) {
  const out: (TransactionSite & { file: string; inFunction: string | undefined })[] = []
  for (const f of files) {
    const file = relative(root, f.path)
    if (file.startsWith('store/')) continue
    const sf = ts.createSourceFile(f.path, f.text, ts.ScriptTarget.Latest, true)
    const visit = (n: ts.Node, inFunction: string | undefined) => {
      let what: string | undefined
      if (ts.isCallExpression(n)) {
        const callee = n.expression
        if (ts.isPropertyAccessExpression(callee) && callee.name.text === 'transaction') what = '.transaction('
        else if (ts.isIdentifier(callee) && callee.text === 'inRequestTransaction') what = 'inRequestTransaction('
      } else if (ts.isNewExpression(n) && ts.isIdentifier(n.expression) && n.expression.text === 'UnitOfWork') what = 'new UnitOfWork('
      if (what) {
        const line = sf.getLineAndCharacterOfPosition(n.getStart(sf)).line + 1
        out.push({ path: f.path, line, what, file, inFunction })
      }
      const name = ts.isFunctionDeclaration(n) && n.name && inFunction === undefined ? n.name.text : inFunction
      ts.forEachChild(n, (c) => visit(c, name))
    }
    visit(sf, undefined)
  }
  return out
}

/** Transactions and units of work opened outside src/store/ and outside the bodies of the two idioms. */
export function transactionSitesOutsideIdioms(files: readonly SourceFile[], root = 'src'): TransactionSite[] {
  return transactionOpenings(files, root)
    .filter((s) => !TRANSACTION_IDIOMS.some((i) => i.path === s.file && i.name === s.inFunction))
    .map(({ path, line, what }) => ({ path, line, what }))
}

/** Call sites of each idiom, by name. */
export function transactionIdiomUses(files: readonly SourceFile[]): Map<string, number> {
  const uses = new Map<string, number>(TRANSACTION_IDIOMS.map((i) => [i.name, 0]))
  for (const f of files) {
    const sf = ts.createSourceFile(f.path, f.text, ts.ScriptTarget.Latest, false)
    const visit = (n: ts.Node) => {
      if (ts.isCallExpression(n) && ts.isIdentifier(n.expression) && uses.has(n.expression.text)) {
        uses.set(n.expression.text, (uses.get(n.expression.text) as number) + 1)
      }
      ts.forEachChild(n, visit)
    }
    visit(sf)
  }
  return uses
}

/** No function over this many lines (docs/decisions.md, "Functions a reader can hold"). */
export const MAX_FUNCTION_LINES = 200

export interface FunctionSize {
  path: string
  name: string
  lines: number
}

/** Every function-like node with its line count, largest first (a nested function counts inside its parent too). */
export function functionSizes(files: readonly SourceFile[]): FunctionSize[] {
  const out: FunctionSize[] = []
  for (const f of files) {
    const sf = ts.createSourceFile(f.path, f.text, ts.ScriptTarget.Latest, true)
    const visit = (n: ts.Node) => {
      if (ts.isFunctionLike(n) && 'body' in n && n.body) {
        const start = sf.getLineAndCharacterOfPosition(n.getStart(sf)).line
        const end = sf.getLineAndCharacterOfPosition(n.getEnd()).line
        const named = (n as { name?: ts.Node }).name
        let name = named ? named.getText(sf) : ''
        if (!name && ts.isVariableDeclaration(n.parent)) name = n.parent.name.getText(sf)
        if (!name && ts.isPropertyAssignment(n.parent)) name = n.parent.name.getText(sf)
        out.push({ path: f.path, name: name || '(anonymous)', lines: end - start + 1 })
      }
      ts.forEachChild(n, visit)
    }
    visit(sf)
  }
  return out.sort((a, b) => b.lines - a.lines)
}

export function filesPerFolder(files: readonly SourceFile[]): Map<string, number> {
  const m = new Map<string, number>()
  for (const f of files) m.set(dirname(f.path), (m.get(dirname(f.path)) ?? 0) + 1)
  return new Map([...m].sort((a, b) => b[1] - a[1]))
}

if (process.argv[1] && resolve(process.argv[1]) === resolve(import.meta.dirname ?? '', 'architecture.ts')) {
  const root = process.argv[2] ?? 'src'
  const testRoot = process.argv[3] ?? 'test'
  const files = readSources(root)
  const edges = importEdges(files, root)
  const cycles = unitCycles(edges)
  const up = upwardImports(edges)
  const sites = querySitesOutsideStores(files)
  const fns = functionSizes(files)
  const folders = filesPerFolder(files)
  console.log(`files: ${files.length}, folders: ${folders.size}, most files in one folder: ${[...folders][0]?.join(' ')}`)
  const long = fns.filter((f) => f.lines > MAX_FUNCTION_LINES)
  console.log(
    `largest functions (${long.length} over ${MAX_FUNCTION_LINES} lines, ${fns.filter((f) => f.lines > 100).length} over 100):${fns
      .slice(0, 10)
      .map((f) => `\n  ${f.lines} ${f.path}:${f.name}`)
      .join('')}`,
  )
  const cross = crossFamilyValueImports(edges)
  const crossPairs = new Map<string, number>()
  for (const e of cross) crossPairs.set(`${e.fromUnit} -> ${e.toUnit}`, (crossPairs.get(`${e.fromUnit} -> ${e.toUnit}`) ?? 0) + 1)
  console.log(
    `value imports across resource families: ${cross.length} (${crossPairs.size} family pairs)${[...crossPairs]
      .sort()
      .map(([pair, n]) => `\n  ${pair} ${n}`)
      .join('')}`,
  )
  const untested = unitsWithoutTests(files, root, testRoot)
  console.log(`units without a test folder: ${untested.length}${untested.map((u) => `\n  ${u}`).join('')}`)
  console.log(`folder-level cycles: ${cycles.length}${cycles.map((c) => `\n  ${c.join(' <-> ')}`).join('')}`)
  const upUnits = [...new Set(up.map((e) => `${e.fromUnit} -> ${e.toUnit}`))].sort()
  console.log(`upward imports: ${up.length} (${upUnits.length} unit pairs)${upUnits.map((u) => `\n  ${u}`).join('')}`)
  const byFile = new Map<string, number>()
  for (const s of sites) byFile.set(s.path, (byFile.get(s.path) ?? 0) + 1)
  console.log(`query sites outside stores: ${sites.length} in ${byFile.size} files${[...byFile].map(([p, n]) => `\n  ${p} ${n}`).join('')}`)
  // Each idiom in use counts, and so does each other way a transaction or a unit of work is opened.
  const uses = transactionIdiomUses(files)
  const elsewhere = transactionSitesOutsideIdioms(files, root)
  const otherKinds = new Map<string, string[]>()
  for (const s of elsewhere) otherKinds.set(s.what, [...(otherKinds.get(s.what) ?? []), `${s.path}:${s.line}`])
  const inUse = TRANSACTION_IDIOMS.filter((i) => (uses.get(i.name) ?? 0) > 0)
  console.log(
    `transaction idioms: ${inUse.length + otherKinds.size}${TRANSACTION_IDIOMS.map((i) => `\n  ${i.name} (${i.for}): ${uses.get(i.name)} call sites`).join('')}${[
      ...otherKinds,
    ]
      .map(([what, at]) => `\n  ${what} outside both: ${at.length} (${at.join(', ')})`)
      .join('')}`,
  )
}
