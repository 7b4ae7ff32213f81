import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { test } from 'node:test'
import { promisify } from 'node:util'

/**
 * The suite runs on a supported Node line, and everything it starts runs on that same Node: test files are run by
 * node's test runner through its own execPath, and tests spawn `process.execPath`, `node` and `npm` from PATH.
 * .ci/run sets CI_NODE_MAJOR for each runtime it tests, so a run that silently fell back to another Node fails.
 */
const run = promisify(execFile)
const engines = (JSON.parse(readFileSync('package.json', 'utf8')) as { engines: { node: string } }).engines.node

type Version = [number, number, number]
const parse = (v: string): Version => v.replace(/^v/, '').split('.').map(Number) as Version
const compare = (a: Version, b: Version) => a[0] - b[0] || a[1] - b[1] || a[2] - b[2]

/** package.json's engines, which this project writes as `>=a.b.c <d` alternatives joined by `||`. */
function supportedLines(range: string): { from: Version; below: number }[] {
  return range.split('||').map((part) => {
    const m = /^\s*>=(\d+\.\d+\.\d+) <(\d+)\s*$/.exec(part)
    assert.ok(m, `engines part "${part}" is not of the form ">=a.b.c <d"`)
    return { from: parse(m[1] as string), below: Number(m[2]) }
  })
}

test('this Node is within a line package.json engines supports (and CI_NODE_MAJOR, when CI sets it)', (t) => {
  const version = parse(process.versions.node)
  t.diagnostic(`node ${process.version} at ${process.execPath}`)
  const lines = supportedLines(engines)
  assert.ok(
    lines.some((l) => compare(version, l.from) >= 0 && version[0] < l.below),
    `node ${process.version} is outside engines "${engines}"`,
  )
  const expected = process.env.CI_NODE_MAJOR
  if (expected !== undefined) assert.equal(version[0], Number(expected))
})

test('the engines lines are Node 20 (end of life, tested on this machine) and Node 24 LTS', () => {
  assert.deepEqual(
    supportedLines(engines).map((l) => [l.from[0], l.below]),
    [
      [20, 21],
      [24, 25],
    ],
  )
})

test('child processes run this same Node: process.execPath, `node` on PATH and the `npm` on PATH', async (t) => {
  const viaExecPath = await run(process.execPath, ['-p', 'process.version'])
  assert.equal(viaExecPath.stdout.trim(), process.version)
  const viaPath = await run('node', ['-p', 'process.version + " " + process.execPath'])
  t.diagnostic(`\`node\` on PATH: ${viaPath.stdout.trim()}`)
  assert.equal(viaPath.stdout.trim().split(' ')[0], process.version)
  // `npm version --json` reports the Node npm itself runs on (npm starts through `#!/usr/bin/env node`).
  const viaNpm = await run('npm', ['version', '--json'], { env: { ...process.env, npm_config_update_notifier: 'false' } })
  const versions = JSON.parse(viaNpm.stdout) as { node: string }
  assert.equal(`v${versions.node}`, process.version)
})
