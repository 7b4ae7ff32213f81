import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { after, before, describe, test } from 'node:test'
import { fetchDocument, PROBLEMS_FILE, renderProblems, renderSchema, SCHEMA_FILE } from '../../packages/sdk/scripts/generate.ts'
import { problemCatalogue as sdkCatalogue } from '../../packages/sdk/src/index.ts'
import { problemCatalogue } from '../../src/domain/problems.ts'
import { startTestApp, type TestApp } from '../helpers/app.ts'
import { engineName } from '../helpers/store.ts'

/**
 * The SDK's generated sources are never edited by hand and never drift: each is compared, byte for byte, with
 * what `npm run sdk:generate` would write now from the live service. A route, schema or problem code changed
 * without regenerating fails here.
 */
let t: TestApp
before(async () => {
  t = await startTestApp()
})
after(() => t.close())

describe(`SDK generated sources (${engineName})`, () => {
  test('src/generated/schema.ts is openapi-typescript output for the live /v1/openapi.json', async () => {
    const res = await t.call('GET', '/v1/openapi.json')
    assert.equal(res.status, 200)
    const expected = await renderSchema(res.json)
    const committed = readFileSync(SCHEMA_FILE, 'utf8')
    assert.ok(committed === expected, 'packages/sdk/src/generated/schema.ts is stale: run `npm run sdk:generate`')
    // Every public operation of the document is in the generated paths.
    for (const path of Object.keys(res.json.paths)) assert.ok(committed.includes(`${JSON.stringify(path)}: {`), path)
  })

  test('the document differs from the committed types when an operation is added (the check can fail)', async () => {
    const res = await t.call('GET', '/v1/openapi.json')
    const doc = structuredClone(res.json)
    doc.paths['/v1/clients/{clientCode}/not-generated'] = {
      get: { operationId: 'notGenerated', responses: { 204: { description: 'none' } } },
    }
    assert.notEqual(await renderSchema(doc), readFileSync(SCHEMA_FILE, 'utf8'))
  })

  test('`sdk:generate --from <url>` reads the same document from a running service', async () => {
    const base = await t.app.app.listen({ host: '127.0.0.1', port: 0 })
    const res = await t.call('GET', '/v1/openapi.json')
    assert.deepEqual(await fetchDocument(base), res.json)
    await assert.rejects(fetchDocument(`${base}/nothing-here/`), /answered 404/)
  })

  test('src/generated/problems.ts is the service problem catalogue, code for code', () => {
    assert.ok(readFileSync(PROBLEMS_FILE, 'utf8') === renderProblems(problemCatalogue), 'problems.ts is stale: run `npm run sdk:generate`')
    assert.deepEqual(sdkCatalogue, problemCatalogue)
    assert.deepEqual(Object.keys(sdkCatalogue), Object.keys(problemCatalogue))
    // A code added to the catalogue without regenerating renders differently.
    assert.notEqual(
      renderProblems({ ...problemCatalogue, brand_new_code: { status: 409, title: 'New' } }),
      readFileSync(PROBLEMS_FILE, 'utf8'),
    )
  })

  test('every problem type the public document names is a code of the SDK union', async () => {
    const res = await t.call('GET', '/v1/openapi.json')
    const named = new Set<string>()
    for (const item of Object.values(res.json.paths) as Record<
      string,
      { responses: Record<string, { content?: Record<string, { examples?: object }> }> }
    >[]) {
      for (const op of Object.values(item)) {
        for (const r of Object.values(op.responses)) {
          for (const code of Object.keys(r.content?.['application/problem+json']?.examples ?? {})) named.add(code)
        }
      }
    }
    assert.ok(named.size >= 20, `only ${named.size} codes named`)
    for (const code of named) assert.ok(Object.hasOwn(sdkCatalogue, code), `${code} is not in the SDK's ProblemCode`)
  })
})
