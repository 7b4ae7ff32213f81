import assert from 'node:assert/strict'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { dirname, resolve } from 'node:path'
import { test } from 'node:test'
import { ConfigSchema, loadConfig, MAX_BATCH_CHUNK_SIZE } from '../../src/config.ts'
import { SCOPES } from '../../src/domain/scopes.ts'

/** The settings the code reads, and the two places a newcomer reads about them, cannot drift apart. */
const variables = Object.keys(ConfigSchema.in.shape).sort()
const readme = readFileSync('README.md', 'utf8')
const envExample = readFileSync('.env.example', 'utf8')

test('every configuration variable is in the README table and in .env.example, and nothing else is', () => {
  const tableRows = readme.split('\n').filter((l) => /^\| `[A-Z_]+`/.test(l))
  const inReadme = [...new Set(tableRows.flatMap((l) => [...(l.split('|')[1] ?? '').matchAll(/`([A-Z_]+)`/g)].map((m) => m[1])))].sort()
  assert.deepEqual(inReadme, variables)
  const inExample = [...envExample.matchAll(/^#? ?([A-Z_]+)=/gm)].map((m) => m[1]).sort()
  assert.deepEqual(inExample, variables)
})

test('the defaults .env.example shows are the defaults the code applies', () => {
  const defaults = loadConfig({})
  const shown = Object.fromEntries([...envExample.matchAll(/^([A-Z_]+)=(.*)$/gm)].map((m) => [m[1], m[2]]))
  // Parsing the example's uncommented values must give exactly the configuration of an empty environment.
  assert.deepEqual(loadConfig(shown), defaults)
})

test('docs/decisions.md states the batch chunk size the code uses', () => {
  const decisions = readFileSync('docs/decisions.md', 'utf8')
  const stated = [...decisions.matchAll(/`BATCH_CHUNK_SIZE`, default (\d+)/g)].map((m) => Number(m[1]))
  assert.deepEqual(stated, [loadConfig({}).batches.chunkSize])
})

/** README.md and every Markdown file under docs/ (the guide's pages included). */
const docFiles = () => [
  'README.md',
  ...readdirSync('docs', { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`)
    .sort(),
]

test('README and docs/ are self-contained: every link points at a file of this repository', () => {
  const files = docFiles()
  const outside: string[] = []
  for (const file of files) {
    const text = readFileSync(file, 'utf8')
    for (const m of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      const target = (m[1] as string).split('#')[0] as string
      // The guide's pages link to the service's own pages (/docs/...): test/browser/guide.test.ts follows those.
      if (file.startsWith('docs/guide/') && target.startsWith('/docs')) continue
      if (/^https?:|^mailto:/.test(target)) outside.push(`${file}: ${target}`)
      else if (target && !existsSync(resolve(dirname(file), target))) outside.push(`${file}: ${target}`)
      else if (target && !resolve(dirname(file), target).startsWith(process.cwd())) outside.push(`${file}: ${target}`)
    }
    for (const m of text.matchAll(/\.\.\/shared\/[\w./-]+/g)) outside.push(`${file}: ${m[0]}`)
  }
  assert.deepEqual(outside, [])
})

test('every grant the README and the docs show can read back what it may write', () => {
  const files = docFiles()
  const grants: string[][] = []
  for (const file of files) {
    const text = readFileSync(file, 'utf8')
    for (const m of text.matchAll(/--scopes ([a-z_]+:[a-z_:,]+)/g)) grants.push((m[1] as string).split(','))
    for (const m of text.matchAll(/"scopes":\s*\[([^\]]*)\]/g))
      grants.push([...(m[1] as string).matchAll(/"([a-z_:]+)"/g)].map((s) => s[1] as string))
  }
  assert.ok(grants.length >= 3, `found ${grants.length} grant examples`)
  // Every scope shown is one the service takes (the README's grant put runs as written).
  assert.deepEqual(
    grants.flat().filter((scope) => !(SCOPES as readonly string[]).includes(scope)),
    [],
  )
  const missing = grants.flatMap((scopes) =>
    scopes
      .filter((s) => s.endsWith(':write') && (SCOPES as readonly string[]).includes(s.replace(/:write$/, ':read')))
      .filter((s) => !scopes.includes(s.replace(/:write$/, ':read')))
      .map((s) => `${scopes.join(',')} lacks ${s.replace(/:write$/, ':read')}`),
  )
  assert.deepEqual(missing, [])
})

test('.env.example and the README state the largest BATCH_CHUNK_SIZE the code takes', () => {
  assert.match(envExample, new RegExp(`records per chunk transaction: 1 to ${MAX_BATCH_CHUNK_SIZE}\\b`))
  assert.match(readme, new RegExp(`records per transaction \\(at most ${MAX_BATCH_CHUNK_SIZE}\\b`))
  assert.ok(!/BATCH_CHUNK_SIZE[^\n]*\b64\b/.test(envExample))
  assert.equal(loadConfig({ BATCH_CHUNK_SIZE: String(MAX_BATCH_CHUNK_SIZE) }).batches.chunkSize, MAX_BATCH_CHUNK_SIZE)
  assert.throws(() => loadConfig({ BATCH_CHUNK_SIZE: String(MAX_BATCH_CHUNK_SIZE + 1) }))
})

test("the demo's export block exports every variable the demo's commands use", () => {
  const demo = readme.slice(readme.indexOf('## Try the demo'), readme.indexOf('\n## ', readme.indexOf('## Try the demo') + 5))
  const blocks = [...demo.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1] as string)
  const exported = new Set([...(blocks[0] ?? '').matchAll(/^export ([A-Z_]+)=/gm)].map((m) => m[1]))
  const used = new Set(blocks.slice(1).flatMap((b) => [...b.matchAll(/\$\{?([A-Z_]+)\b/g)].map((m) => m[1])))
  const setInBlocks = new Set(blocks.slice(1).flatMap((b) => [...b.matchAll(/^\s*(?:export )?([A-Z_]+)=/gm)].map((m) => m[1])))
  assert.ok(exported.has('ADMIN_TOKEN') && used.has('ADMIN_TOKEN'))
  assert.deepEqual(
    [...used].filter((v) => !exported.has(v) && !setInBlocks.has(v)),
    [],
  )
})

test('docs/decisions.md keeps decisions, not the working history', () => {
  const decisions = readFileSync('docs/decisions.md', 'utf8')
  const history = decisions
    .split('\n')
    .filter((line) => /\bsession \d+|\bthis round\b|\b(issue|round) \d+, items?\b|\bowned elsewhere\b|\bused to\b|^Issue \d+/i.test(line))
  assert.deepEqual(history, [])
  // One section per topic: no heading twice.
  const headings = decisions.split('\n').filter((l) => l.startsWith('## '))
  assert.deepEqual(
    headings.filter((h, i) => headings.indexOf(h) !== i),
    [],
  )
})
