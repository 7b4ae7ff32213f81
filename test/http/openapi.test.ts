import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { Validator } from '@seriousme/openapi-schema-validator'
import { problemCatalogue } from '../../src/domain/problems.ts'
import { ADMIN_TOKEN, startTestApp, type TestApp } from '../helpers/app.ts'

let t: TestApp
// biome-ignore lint/suspicious/noExplicitAny: the document is inspected structurally
let doc: any
before(async () => {
  t = await startTestApp()
  const res = await t.call('GET', '/v1/openapi.json')
  assert.equal(res.status, 200)
  doc = res.json
})
after(() => t.close())

test('the document is valid OpenAPI 3.1, version 1.0.0', async () => {
  const validator = new Validator()
  const result = await validator.validate(structuredClone(doc))
  assert.deepEqual(result.errors ?? [], [])
  assert.equal(result.valid, true)
  assert.equal(validator.version, '3.1')
  assert.match(doc.openapi, /^3\.1\.\d+$/)
  assert.equal(doc.info.version, '1.0.0')
})

test('it lists exactly the implemented public operations', () => {
  const documented = Object.entries(doc.paths as Record<string, Record<string, unknown>>)
    .flatMap(([path, ops]) => Object.keys(ops).map((m) => `${m.toUpperCase()} ${path}`))
    .sort()
  const registered = t.app.routes
    .filter((r) => r.public)
    .map((r) => `${r.method} ${r.path.replace(/:([A-Za-z]+)/g, '{$1}')}`)
    .sort()
  assert.deepEqual(documented, registered)
  assert.ok(registered.every((r) => r.split(' ')[1]?.startsWith('/v1/')))
  assert.ok(!documented.some((d) => d.includes('/admin/')))
  assert.equal(
    new Set(
      Object.values(doc.paths).flatMap((ops) => Object.values(ops as Record<string, { operationId: string }>).map((o) => o.operationId)),
    ).size,
    registered.length,
  )
})

test('every operation documents its error responses from the problem catalogue', () => {
  const put = doc.paths['/v1/clients/{clientCode}/customers/{externalCustomerId}'].put
  assert.deepEqual(Object.keys(put.responses).sort(), ['200', '201', '400', '401', '403', '409', '413', '415', '422', '429', '503'])
  assert.deepEqual(Object.keys(put.responses['409'].content['application/problem+json'].examples), [
    'contact_update_unsupported',
    'customer_erased',
  ])
  for (const [path, ops] of Object.entries(
    doc.paths as Record<
      string,
      Record<
        string,
        {
          responses: Record<
            string,
            { content?: Record<string, { examples?: Record<string, { value: { type: string; status: number } }> }> }
          >
        }
      >
    >,
  )) {
    for (const [method, op] of Object.entries(ops)) {
      for (const [status, response] of Object.entries(op.responses)) {
        const examples = response.content?.['application/problem+json']?.examples
        if (Number(status) < 400) continue
        assert.ok(examples, `${method} ${path} ${status} documents its problems`)
        for (const [code, ex] of Object.entries(examples ?? {})) {
          assert.equal(problemCatalogue[code as keyof typeof problemCatalogue].status, Number(status), `${code} under ${status}`)
          assert.equal(ex.value.type, `https://docs.irs.test/problems/${code}`)
        }
      }
    }
  }
})

test('every $ref resolves, and the unshown enumerations are published as enums', () => {
  const refs = JSON.stringify(doc).match(/"\$ref":"#\/components\/schemas\/[^"]+"/g) ?? []
  for (const ref of new Set(refs)) {
    const name = ref.slice('"$ref":"#/components/schemas/'.length, -1)
    assert.ok(doc.components.schemas[name], `${name} is defined`)
  }
  const s = doc.components.schemas
  assert.deepEqual(s.Email.properties.type.enum, ['personal', 'work', 'other'])
  assert.deepEqual(s.Phone.properties.type.enum, ['mobile', 'home', 'work', 'other'])
  assert.deepEqual(s.Address.properties.type.enum, ['home', 'work', 'postal', 'other'])
  assert.deepEqual(s.ResponsibleCustomer.properties.role.enum, ['primary', 'co_borrower', 'guarantor'])
  assert.ok(s.CreditUnionContext.properties.loanType.enum.includes('auto'))
  assert.ok(s.PaymentObservationWrite.properties.method.enum.includes('bank_transfer'))
  assert.deepEqual(s.PaymentObservationWrite.properties.type.enum, ['payment', 'refund', 'reversal'])
  assert.deepEqual(s.PauseCommand.properties.reason.enum, ['source_request', 'hardship_review', 'dispute_review', 'other'])
  assert.deepEqual(s.PaymentRequest.properties.status.enum, ['open', 'confirmed', 'failed', 'expired', 'canceled'])
  assert.deepEqual(s.PaymentRequest.properties.cancelReason.enum, ['requested', 'balance_changed'])
  assert.deepEqual(s.Payment.properties.status.enum, ['confirmed', 'failed'])
  assert.deepEqual(s.ReceiptDelivery.properties.acknowledgement.properties.status.enum, [
    'pending',
    'partially_acknowledged',
    'acknowledged',
    'held',
  ])
})

test('the same schema that validates requests is the one published', () => {
  const customerWrite = doc.components.schemas.CustomerWrite
  assert.ok(customerWrite.oneOf ?? customerWrite.anyOf, 'CustomerWrite is a union of person and organization')
  assert.equal(doc.components.schemas.ExternalId.pattern, '^[A-Za-z0-9_-]{1,128}$')
})

test('no summary or description says "a" before a vowel ("Read a Adjustment")', async () => {
  const operator = await t.call('GET', '/admin/v1/openapi.json', { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
  assert.equal(operator.status, 200)
  const texts = [doc, operator.json].flatMap((d) =>
    Object.values(d.paths as Record<string, Record<string, { summary: string; description?: string }>>).flatMap((ops) =>
      Object.values(ops).flatMap((o) => [o.summary, o.description ?? '']),
    ),
  )
  assert.deepEqual(
    texts.filter((s) => /\ba [AEIOU]/.test(s)),
    [],
  )
  const summaries = Object.fromEntries(t.app.routes.map((r) => [r.operationId, r.summary]))
  assert.equal(summaries.putAdjustment, 'Record an adjustment')
  assert.equal(summaries.getAdjustment, 'Read an adjustment')
  assert.equal(summaries.putCreditNote, 'Record a credit note')
  assert.equal(summaries.getWriteOff, 'Read a write-off')
})

test('ReceivableWrite lists creditUnion as required, as the service enforces it (profile_mismatch when missing)', () => {
  const s = doc.components.schemas.ReceivableWrite
  assert.ok(s.required.includes('creditUnion'))
  assert.match(s.description, /profile_mismatch/)
  assert.deepEqual(s.examples?.[0]?.creditUnion?.loanType, 'auto')
})
