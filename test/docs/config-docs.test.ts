import assert from 'node:assert/strict'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { dirname, resolve } from 'node:path'
import { test } from 'node:test'
import { ConfigSchema, loadConfig } from '../../src/config.ts'

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

test('README and docs/ are self-contained: every link points at a file of this repository', () => {
  const files = ['README.md', ...readdirSync('docs').map((f) => `docs/${f}`)]
  const outside: string[] = []
  for (const file of files) {
    const text = readFileSync(file, 'utf8')
    for (const m of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      const target = (m[1] as string).split('#')[0] as string
      if (/^https?:|^mailto:/.test(target)) outside.push(`${file}: ${target}`)
      else if (target && !existsSync(resolve(dirname(file), target))) outside.push(`${file}: ${target}`)
      else if (target && !resolve(dirname(file), target).startsWith(process.cwd())) outside.push(`${file}: ${target}`)
    }
    for (const m of text.matchAll(/\.\.\/shared\/[\w./-]+/g)) outside.push(`${file}: ${m[0]}`)
  }
  assert.deepEqual(outside, [])
})
