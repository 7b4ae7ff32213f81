import assert from 'node:assert/strict'
import { execFile, spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import ts from 'typescript'
import { seedDemo } from '../../src/seed.ts'
import { startTestApp, type TestApp } from '../helpers/app.ts'
import { engineName } from '../helpers/store.ts'

/**
 * The SDK README's five-line example, taken from the README itself: it type-checks against the SDK's generated
 * types, and, run as is with node against the built package (`@inbound-receivables/sdk` resolved through the
 * workspace link to packages/sdk/dist, as `npm start` builds it) and a seeded demo, prints the demo Receivable.
 * Only the base URL is changed, to this test's port.
 */
const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..')
const readme = readFileSync(join(root, 'packages/sdk/README.md'), 'utf8')

function fiveLineExample(): string {
  const section = readme.split('\n## ').find((s) => s.startsWith('Five lines'))
  assert.ok(section, 'README has a "Five lines" section')
  const match = /```ts\n([\s\S]*?)```/.exec(section)
  assert.ok(match, 'the section has a ts code block')
  return match[1]!
}

async function node(code: string, env: NodeJS.ProcessEnv): Promise<{ status: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', code], {
      cwd: root,
      env,
      timeout: 60_000,
    })
    return { status: 0, stdout, stderr }
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string }
    return { status: typeof e.code === 'number' ? e.code : -1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' }
  }
}

let t: TestApp
let base: string
let key: string
before(async () => {
  t = await startTestApp()
  base = await t.app.app.listen({ host: '127.0.0.1', port: 0 })
  const seeded = await seedDemo(t.store, t.app)
  assert.ok(seeded)
  key = seeded.apiKey
})
after(() => t.close())

describe(`SDK README example (${engineName})`, () => {
  test('five lines of code, with one import of the package and the quick start address', () => {
    const code = fiveLineExample()
    const lines = code.split('\n').filter((l) => l.trim() !== '')
    assert.equal(lines.length, 5, code)
    assert.equal(lines[0], "import { createClient } from '@inbound-receivables/sdk'")
    assert.equal(code.split("'http://127.0.0.1:8080'").length, 2, 'the example uses the quick start address once')
    // The README's quick start is still the two commands the example starts from.
    const rootReadme = readFileSync(join(root, 'README.md'), 'utf8')
    assert.ok(rootReadme.includes('```sh\nnpm ci && npm start\n```'))
    assert.ok(rootReadme.includes('packages/sdk/README.md'), 'the root README points to the SDK README')
  })

  test('the example is saved in your own project, where the package is installed, not in the repository', () => {
    const section = readme.split('\n## ').find((s) => s.startsWith('Five lines'))!
    const intro = section.slice(0, section.indexOf('```'))
    assert.match(intro, /in\s+your own project where you installed the package/)
    assert.doesNotMatch(intro, /repository root\S*\s+\S*\s*(save|and save)|second terminal in the repository/)
    assert.ok(readme.indexOf('\n## Installing') < readme.indexOf('\n## Five lines'), 'Installing comes first')
  })

  test('it type-checks against the SDK (strict)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'irs-sdk-readme-'))
    try {
      const file = join(dir, 'hello.mts')
      writeFileSync(file, fiveLineExample())
      const program = ts.createProgram([file], {
        strict: true,
        noEmit: true,
        target: ts.ScriptTarget.ES2022,
        module: ts.ModuleKind.NodeNext,
        moduleResolution: ts.ModuleResolutionKind.NodeNext,
        allowImportingTsExtensions: true,
        skipLibCheck: true,
        types: ['node'],
        typeRoots: [join(root, 'node_modules/@types')],
        baseUrl: root,
        paths: { '@inbound-receivables/sdk': ['packages/sdk/src/index.ts'] },
      })
      const diagnostics = ts.getPreEmitDiagnostics(program).map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'))
      assert.deepEqual(diagnostics, [])
      // The check can fail: a misspelt field is an error.
      writeFileSync(file, fiveLineExample().replace('financialPosition.workingAmount', 'financialPosition.workingAmmount'))
      const bad = ts.createProgram([file], program.getCompilerOptions())
      assert.equal(ts.getPreEmitDiagnostics(bad).length, 1)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  test('run as is with the demo key, it prints the seeded Receivable', async () => {
    const build = spawnSync(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-p', 'packages/sdk', '--noCheck'], {
      cwd: root,
      encoding: 'utf8',
    })
    assert.equal(build.status, 0, build.stdout + build.stderr)
    const code = fiveLineExample().replace("'http://127.0.0.1:8080'", JSON.stringify(base))
    // Asynchronously: the service answering it runs in this process.
    const run = await node(code, { ...process.env, KEY: key })
    assert.equal(run.stderr, '')
    assert.equal(run.status, 0)
    const expected = await t.call('GET', '/v1/clients/demo/receivables/rcv-demo-1', { key })
    assert.equal(expected.status, 200)
    const { amount, currency } = expected.json.financialPosition.workingAmount
    assert.equal(run.stdout, `rcv-demo-1 ${expected.json.status} { amount: '${amount}', currency: '${currency}' }\n`)

    // Without the key the example stops at once with the SDK's message, before any request.
    const env = { ...process.env }
    delete env.KEY
    const noKey = await node(code, env)
    assert.equal(noKey.status, 1)
    assert.match(noKey.stderr, /TypeError: createClient: apiKey is required/)
  })
})
