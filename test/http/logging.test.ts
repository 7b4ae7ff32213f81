import assert from 'node:assert/strict'
import { test } from 'node:test'
import pino from 'pino'
import { LOG_REDACT_PATHS } from '../../src/http/server.ts'

test('the logger redacts keys, tokens, secrets and bodies, and keeps request paths', () => {
  const lines: string[] = []
  const log = pino({ redact: { paths: LOG_REDACT_PATHS, censor: '[redacted]' } }, { write: (l: string) => lines.push(l) })
  log.info({
    req: {
      method: 'PUT',
      url: '/v1/clients/demo/customers/c-1',
      headers: { authorization: 'Bearer irk_sandbox_SECRET0000000000000000000000000000' },
    },
    apiKey: 'irk_sandbox_SECRET0000000000000000000000000000',
    created: { apiKey: 'irk_sandbox_SECRET2', signingSecret: 'whsec_SECRET3' },
    webhook: { webhookUrl: 'https://hooks.example.com/SECRET4' },
    body: { name: { firstName: 'Ada' } },
  })
  const out = lines.join('')
  for (const secret of ['SECRET0', 'SECRET2', 'SECRET3', 'SECRET4', 'Ada']) assert.ok(!out.includes(secret), secret)
  assert.ok(out.includes('/v1/clients/demo/customers/c-1'))
})
