import { createClient } from '../../packages/sdk/src/index.ts'

/**
 * Type-level checks of the SDK, run by `npx tsc --noEmit` (not a test file: nothing here executes). Each
 * `@ts-expect-error` must meet an error, so a regression in the generated or derived types fails typecheck.
 */

const irs = createClient({ baseUrl: 'http://x', apiKey: 'k', clientCode: 'demo' })
export async function probe() {
  const r = await irs.GET('/v1/clients/{clientCode}/receivables/{externalReceivableId}', {
    params: { path: { externalReceivableId: 'a' } },
  })
  const s: string = r.financialPosition.workingAmount.amount
  const f = await irs.GET('/v1/clients/{clientCode}/source-freshness')
  await irs.GET('/v1/clients/{clientCode}/receivables/{externalReceivableId}', {
    // @ts-expect-error clientCode is not a parameter: the client is bound to one
    params: { path: { clientCode: 'x', externalReceivableId: 'a' } },
  })
  // @ts-expect-error missing path param
  await irs.GET('/v1/clients/{clientCode}/receivables/{externalReceivableId}')
  // @ts-expect-error unknown path
  await irs.GET('/v1/clients/{clientCode}/nope')
  const b = await irs.PUT('/v1/clients/{clientCode}/batches/{externalBatchId}', {
    params: { path: { externalBatchId: 'b' } },
    body: { records: [] },
  })
  const st: 'queued' | 'running' | 'succeeded' | 'partially_succeeded' | 'failed' = b.status
  // @ts-expect-error body required
  await irs.PUT('/v1/clients/{clientCode}/batches/{externalBatchId}', { params: { path: { externalBatchId: 'b' } } })
  return [s, f, st]
}
