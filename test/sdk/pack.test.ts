import assert from 'node:assert/strict'
import { execFileSync, spawnSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { after, before, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import ts from 'typescript'

/**
 * The SDK installed outside this repository, as its README's "Installing" section says: `npm pack` makes a tarball,
 * a scratch project (in the system's temporary directory, with no link to the repository) installs it, offline
 * (its one dependency, openapi-fetch, and that one's, are packed from this repository's node_modules, as a registry
 * would serve them), and an example type-checks against the installed package's declarations and runs.
 */
const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..')
const readme = readFileSync(join(root, 'packages/sdk/README.md'), 'utf8')
const version = JSON.parse(readFileSync(join(root, 'packages/sdk/package.json'), 'utf8')).version as string
const tarball = `inbound-receivables-sdk-${version}.tgz`

let dir: string
let project: string
before(() => {
  dir = mkdtempSync(join(tmpdir(), 'irs-sdk-pack-'))
  project = join(dir, 'my-integration')
  mkdirSync(project)
})
after(() => rmSync(dir, { recursive: true, force: true }))

const npm = (args: string[], cwd: string) =>
  spawnSync('npm', [...args, '--no-audit', '--no-fund', '--loglevel=error'], {
    cwd,
    encoding: 'utf8',
    env: { ...process.env, npm_config_update_notifier: 'false' },
  })

const example = `import { createClient, ProblemError, type BatchRecord } from '@inbound-receivables/sdk'

const irs = createClient({ baseUrl: 'http://127.0.0.1:8080', apiKey: process.env.KEY, clientCode: 'demo' })
export async function main(): Promise<string> {
  const receivable = await irs.GET('/v1/clients/{clientCode}/receivables/{externalReceivableId}', {
    params: { path: { externalReceivableId: 'rcv-demo-1' } },
  })
  const records: BatchRecord[] = [{ recordId: 'c', kind: 'customer', externalId: 'c-1', body: { type: 'person', name: { firstName: 'Ada', lastName: 'L' }, sourceReference: 's' } }]
  for await (const customer of await irs.GET('/v1/clients/{clientCode}/customers')) console.log(customer.externalCustomerId)
  try {
    await irs.runBatch('b-1', { records })
  } catch (err) {
    if (err instanceof ProblemError && err.code === 'batch_conflict') console.log(err.toString())
  }
  return receivable.financialPosition.workingAmount.amount
}
`

function typeCheck(source: string): string[] {
  const file = join(project, 'example.ts')
  writeFileSync(file, source)
  const program = ts.createProgram([file], {
    strict: true,
    noEmit: true,
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    types: ['node'],
    typeRoots: [join(root, 'node_modules/@types')],
  })
  return ts.getPreEmitDiagnostics(program).map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'))
}

test('the README says how to install the SDK outside the repository, from an npm pack tarball', () => {
  const section = readme.split('\n## ').find((s) => s.startsWith('Installing'))
  assert.ok(section, 'the SDK README has an "Installing" section')
  assert.ok(section.includes('npm pack -w packages/sdk --pack-destination /tmp'), section)
  assert.ok(section.includes(`npm install /tmp/${tarball}`), section)
})

test('npm pack makes a tarball with the built package and nothing else; a scratch project installs it offline', () => {
  const pack = npm(['pack', '-w', 'packages/sdk', '--pack-destination', dir, '--json'], root)
  assert.equal(pack.status, 0, pack.stderr)
  const [packed] = JSON.parse(pack.stdout) as { filename: string; files: { path: string }[] }[]
  assert.equal(packed?.filename, tarball)
  const files = packed.files.map((f) => f.path).sort()
  assert.ok(
    files.includes('dist/index.js') && files.includes('dist/index.d.ts') && files.includes('dist/generated/schema.d.ts'),
    files.join(),
  )
  assert.deepEqual(
    files.filter((f) => !f.startsWith('dist/')),
    ['README.md', 'package.json'],
  )
  assert.ok(!files.some((f) => f.endsWith('.tsbuildinfo') || f.startsWith('src/')), files.join())

  // What a registry would serve for the dependencies: packed from this repository's installed copies.
  const deps = npm(
    ['pack', './node_modules/openapi-fetch', './node_modules/openapi-typescript-helpers', '--pack-destination', dir, '--json'],
    root,
  )
  assert.equal(deps.status, 0, deps.stderr)
  const depFiles = (JSON.parse(deps.stdout) as { filename: string }[]).map((d) => join(dir, d.filename))

  writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'my-integration', private: true, type: 'module' }))
  const install = npm(['install', '--offline', join(dir, tarball), ...depFiles], project)
  assert.equal(install.status, 0, install.stderr)
  assert.deepEqual(readdirSync(join(project, 'node_modules/@inbound-receivables/sdk')).sort(), ['README.md', 'dist', 'package.json'])
})

test('an example type-checks against the installed package (and a wrong field or an incomplete batch record does not)', () => {
  assert.deepEqual(typeCheck(example), [])
  const misspelt = typeCheck(example.replace('workingAmount.amount', 'workingAmount.amont'))
  assert.equal(misspelt.length, 1, misspelt.join('\n'))
  assert.match(misspelt[0]!, /amont/)
  const incomplete = typeCheck(example.replace(", sourceReference: 's' }", ' }'))
  assert.equal(incomplete.length, 1, incomplete.join('\n'))
  assert.match(incomplete[0]!, /sourceReference/)
})

test('the installed package runs: the import resolves to its dist, and a problem prints one line', () => {
  const code = `import { createClient, ProblemError, SDK_VERSION } from '@inbound-receivables/sdk'
import { fileURLToPath } from 'node:url'
const resolved = fileURLToPath(import.meta.resolve('@inbound-receivables/sdk'))
const irs = createClient({ baseUrl: 'http://127.0.0.1:1', apiKey: 'k', clientCode: 'demo' })
console.log(SDK_VERSION, irs.clientCode, typeof ProblemError, resolved.endsWith('/my-integration/node_modules/@inbound-receivables/sdk/dist/index.js'))`
  const out = execFileSync(process.execPath, ['--input-type=module', '-e', code], { cwd: project, encoding: 'utf8' })
  assert.equal(out, `${version} demo function true\n`)
})
