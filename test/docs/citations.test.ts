import assert from 'node:assert/strict'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { dirname, join, relative, resolve } from 'node:path'
import { describe, test } from 'node:test'
import ts from 'typescript'
import { listMigrations } from '../../src/store/migrate.ts'

/**
 * Code and docs cite only files the repository contains (docs/design/README.md, "Citing these files").
 *
 * Where a citation can be: the text of a Markdown file outside its fenced code blocks (commands and examples, not
 * citations); the comments and prose strings (a test's title) of a TypeScript file; the `--` comments of an SQL
 * file. What a citation is, there:
 * - a token ending in a file extension (`.md`, `.ts`, `.sql`, `.json`, `.yaml`, `.yml`, `.sh`): a file named by its
 *   path from the repository's root, from the citing file's folder or a folder above it, or by its tail
 *   (`payments/provider-events.ts`, `worker.ts`);
 * - a token starting with one of the repository's own folders (`src/`, `test/`, `docs/`, `packages/`, `scripts/`,
 *   `bench/`, `bin/`): a file or folder named by its path from the root (or from a folder above the citing file,
 *   as packages/sdk's own `src/`). A glob (`src/store/migrations/NNNN_*.sql`) names the folder it is in.
 * A token right after `/`, `:`, `@`, `.` or `$` is part of a URL, a route, an npm package or an expression, not a
 * citation; `dist/` is what the build writes, never in the repository. A tail must be the end of some file's path:
 * the external design note and the provider's events "under payments/" were cited for a long time and matched
 * nothing.
 */
const root = resolve(import.meta.dirname, '../..')
const skipped = new Set(['node_modules', '.git', 'dist', 'data', 'coverage'])
const extensions = 'md|ts|sql|json|yaml|yml|sh'
const folders = 'src|test|docs|packages|scripts|bench|bin'
const citationPattern = new RegExp(
  `(?<![\\w./:@$*-])((?:\\.{1,2}/)*(?:(?:${folders})/[\\w.*/-]*|(?:[\\w*-][\\w.*-]*/)*[\\w*-][\\w.*-]*\\.(?:${extensions})))(?![\\w/-]|\\.\\w)`,
  'g',
)
/** Files a reader is told to create, named in prose: not citations (packages/sdk/README.md, docs/operations.md). */
const notCitations = new Set(['hello.ts', 'compose.override.yaml'])

function walk(dir: string, into: string[] = []): string[] {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (skipped.has(entry.name)) continue
    const path = join(dir, entry.name)
    if (entry.isDirectory()) walk(path, into)
    else into.push(relative(root, path))
  }
  return into
}

const everyFile = walk(root)
const tails = new Set<string>()
for (const file of everyFile) {
  const parts = file.split('/')
  for (let i = 0; i < parts.length; i++) tails.add(parts.slice(i).join('/'))
}

const prose = new Set([
  ts.SyntaxKind.StringLiteral,
  ts.SyntaxKind.NoSubstitutionTemplateLiteral,
  ts.SyntaxKind.TemplateHead,
  ts.SyntaxKind.TemplateMiddle,
  ts.SyntaxKind.TemplateTail,
])

/** The names whose first argument is a title: `test('...')`, `it(...)`, `describe(...)`. */
const titled = new Set(['test', 'it', 'describe'])

/** The comments, and the titles of tests and suites, of a TypeScript source. */
function tsCommentsAndProse(text: string): string[] {
  const parts: string[] = []
  const scanner = ts.createScanner(ts.ScriptTarget.Latest, false, ts.LanguageVariant.Standard, text)
  // The brace depth at which each open template literal's `${` was opened: the `}` there continues the template.
  const templates: number[] = []
  let depth = 0
  // The last two tokens that are not trivia: a title follows `test` and `(`.
  let before: [string, string] = ['', '']
  for (let kind = scanner.scan(); kind !== ts.SyntaxKind.EndOfFileToken; kind = scanner.scan()) {
    if (kind === ts.SyntaxKind.OpenBraceToken) depth++
    else if (kind === ts.SyntaxKind.CloseBraceToken) {
      if (templates.at(-1) === depth) {
        kind = scanner.reScanTemplateToken(false)
        if (kind === ts.SyntaxKind.TemplateTail) templates.pop()
      } else depth--
    } else if (kind === ts.SyntaxKind.TemplateHead) templates.push(depth)
    const token = scanner.getTokenText()
    if (kind === ts.SyntaxKind.SingleLineCommentTrivia || kind === ts.SyntaxKind.MultiLineCommentTrivia) parts.push(token)
    else if (prose.has(kind) && before[1] === '(' && titled.has(before[0])) parts.push(token)
    if (kind !== ts.SyntaxKind.WhitespaceTrivia && kind !== ts.SyntaxKind.NewLineTrivia) before = [before[1], token]
  }
  return parts
}

/** The parts of a file in which a path is a citation. */
function citingText(file: string): string[] {
  const text = readFileSync(join(root, file), 'utf8')
  // Fenced blocks go, and bold's `**` (which would read as a glob).
  if (file.endsWith('.md')) return [text.replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[^\n]*$/gm, '').replaceAll('**', ' ')]
  if (file.endsWith('.sql')) return text.split('\n').flatMap((l) => (l.includes('--') ? [l.slice(l.indexOf('--'))] : []))
  if (file.endsWith('.ts')) return tsCommentsAndProse(text)
  return []
}

/** The paths a file cites. */
export function citations(file: string): string[] {
  return citingText(file)
    .flatMap((text) => [...text.matchAll(citationPattern)].map((m) => (m[1] as string).replace(/\.$/, '')))
    .filter((cited) => !/(^|\/)dist(\/|$)/.test(cited) && !notCitations.has(cited))
}

/** Whether a path cited by `citing` names something the repository holds. */
export function exists(cited: string, citing: string): boolean {
  const glob = cited.indexOf('*')
  const path = (glob < 0 ? cited : cited.slice(0, Math.max(0, cited.lastIndexOf('/', glob)))).replace(/\/+$/, '')
  for (let dir = dirname(citing); ; dir = dirname(dir)) {
    if (path === '' || existsSync(join(root, dir, path))) return true
    if (dir === '.') break
  }
  return !path.startsWith('.') && tails.has(path)
}

const citingFiles = everyFile.filter((f) => (/^(src|test|docs|packages)\//.test(f) || f === 'README.md') && !f.startsWith('test/fixtures/'))

describe('citations', () => {
  test('every path cited in src/, test/, docs/, packages/ and README.md exists (the list names each missing one)', () => {
    const missing = citingFiles.flatMap((file) =>
      citations(file)
        .filter((cited) => !exists(cited, file))
        .map((cited) => `${file}: ${cited}`),
    )
    assert.deepEqual(missing, [], `${missing.length} cited paths are missing:\n${missing.join('\n')}`)
  })
})

describe('migration numbers', () => {
  test('run from 0001 with no gap that src/store/migrations/README.md does not explain or reserve', () => {
    const versions = new Set(listMigrations().map((m) => m.version))
    const highest = Math.max(...versions)
    const gaps = Array.from({ length: highest }, (_, i) => i + 1).filter((v) => !versions.has(v))
    const notes = readFileSync(join(root, 'src/store/migrations/README.md'), 'utf8')
    const listed = (heading: string) => {
      const start = notes.indexOf(`## ${heading}`)
      const section = start < 0 ? '' : notes.slice(start, notes.indexOf('\n## ', start + 1) >>> 0)
      return Array.from(section.matchAll(/^- \*\*(\d{4})(?: to (\d{4}))?\*\*:/gm), (m) => [Number(m[1]), Number(m[2] ?? m[1])] as const)
    }
    const covered = (v: number) => [...listed('Gaps'), ...listed('Reserved')].some(([from, to]) => from <= v && v <= to)
    assert.deepEqual(
      gaps.filter((v) => !covered(v)),
      [],
    )
    // An explained gap is a gap: a number used since must leave the list.
    assert.deepEqual(
      listed('Gaps').filter(([from, to]) => Array.from({ length: to - from + 1 }, (_, i) => from + i).some((v) => versions.has(v))),
      [],
    )
  })
})
