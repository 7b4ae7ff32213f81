import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { test } from 'node:test'

/** Installing the service must send nothing anywhere and warn about nothing on a supported Node. */
const pkg = JSON.parse(readFileSync('package.json', 'utf8'))
const lock = JSON.parse(readFileSync('package-lock.json', 'utf8')) as { packages: Record<string, { engines?: { node?: string } }> }

test("swagger-ui-dist's analytics (@scarf/scarf) are off and its install script is not approved", () => {
  assert.deepEqual(pkg.scarfSettings, { enabled: false })
  assert.equal(pkg.allowScripts['@scarf/scarf'], false)
})

test('no locked package asks for a newer Node than this one (npm ci prints no EBADENGINE warning)', () => {
  const major = Number(process.versions.node.split('.')[0])
  const tooNew = Object.entries(lock.packages)
    .filter(([, p]) => {
      const m = /^>=\s*(\d+)/.exec(p.engines?.node ?? '')
      return m !== null && Number(m[1]) > major
    })
    .map(([name, p]) => `${name} ${p.engines?.node}`)
  assert.deepEqual(tooNew, [])
})
