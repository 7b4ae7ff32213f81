import { defineRoute, type RouteDef } from '../../http/route.ts'
import { ReconciliationParams, ReconciliationResponse, ReconciliationWrite, ResolutionWrite } from './schema.ts'
import type { ReconciliationService } from './service.ts'

const path = '/v1/clients/:clientCode/payment-reconciliations/:externalReconciliationId'

export function reconciliationRoutes(reconciliations: ReconciliationService): RouteDef[] {
  return [
    defineRoute({
      method: 'PUT',
      path,
      operationId: 'putPaymentReconciliation',
      summary: 'Reconcile a confirmed Payment with Source receipt lines',
      description:
        'Immutable. Matched lines move their amount from confirmedUnreconciledAmount to receiptAcknowledgedAmount. A line that differs holds the reconciliation: every affected Receivable gets the reconciliation_hold, its authorized recovery instruction is suspended and new Payment requests there are refused until a resolution. An identical retry answers 200 with the current state.',
      tags: ['Payment reconciliations'],
      auth: { kind: 'api_key', scopes: ['financial_corrections:write'] },
      params: ReconciliationParams,
      body: { schema: ReconciliationWrite, mediaType: 'application/json' },
      responses: {
        201: { schema: ReconciliationResponse, description: 'Accepted, matched or held' },
        200: { schema: ReconciliationResponse, description: 'An identical retry: the current state' },
      },
      problems: ['payment_reconciliation_conflict', 'payment_not_confirmed'],
      public: true,
      handler: async ({ clientCode, grant, params, body, slot }) =>
        reconciliations.put(clientCode, grant, params.externalReconciliationId, body, slot),
    }),
    defineRoute({
      method: 'GET',
      path,
      operationId: 'getPaymentReconciliation',
      summary: 'Read a Payment reconciliation with the allocations of its Payment',
      tags: ['Payment reconciliations'],
      auth: { kind: 'api_key', scopes: ['financial_corrections:read'] },
      params: ReconciliationParams,
      responses: { 200: { schema: ReconciliationResponse, description: 'The reconciliation' } },
      problems: ['payment_reconciliation_not_found'],
      public: true,
      handler: async ({ clientCode, params }) => ({
        status: 200,
        body: await reconciliations.get(clientCode, params.externalReconciliationId),
      }),
    }),
    defineRoute({
      method: 'PUT',
      path: `${path}/resolution`,
      operationId: 'putPaymentReconciliationResolution',
      summary: 'Resolve a held Payment reconciliation',
      description:
        "basis matching_evidence is accepted only when matched receipt lines of every reconciliation of the Payment account for the full allocation of every Receivable this reconciliation holds; authorized_correction needs the Source reference of the correction. Releases only this reconciliation's holds, never resumes recovery, and keeps the lines as received. An identical retry answers 200 and changes nothing.",
      tags: ['Payment reconciliations'],
      auth: { kind: 'api_key', scopes: ['financial_corrections:write'] },
      params: ReconciliationParams,
      body: { schema: ResolutionWrite, mediaType: 'application/json' },
      responses: { 200: { schema: ReconciliationResponse, description: 'Resolved, or an identical retry' } },
      problems: ['payment_reconciliation_not_found', 'reconciliation_not_held', 'matching_evidence_incomplete'],
      public: true,
      handler: async ({ clientCode, grant, params, body, slot }) =>
        reconciliations.resolve(clientCode, grant, params.externalReconciliationId, body, slot),
    }),
  ]
}
