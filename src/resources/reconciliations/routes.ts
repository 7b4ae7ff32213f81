import { ClientParams } from '../../http/common-schemas.ts'
import { defineRoute, type RouteDef } from '../../http/route.ts'
import { type RouteDeps, writeRoute } from '../operations.ts'
import { ReconciliationList, ReconciliationListQuery, ReconciliationParams, ReconciliationResponse } from './schema.ts'
import type { ReconciliationService } from './service.ts'

const base = '/v1/clients/:clientCode/payment-reconciliations'
const path = `${base}/:externalReconciliationId`

export function reconciliationRoutes(deps: RouteDeps, reconciliations: ReconciliationService): RouteDef[] {
  return [
    writeRoute(deps, reconciliations.putOperation, {
      method: 'PUT',
      path,
      idParam: 'externalReconciliationId',
      params: ReconciliationParams,
      operationId: 'putPaymentReconciliation',
      summary: 'Reconcile a confirmed Payment with Source receipt lines',
      description:
        'Immutable. Matched lines move their amount from confirmedUnreconciledAmount to receiptAcknowledgedAmount. A line that differs holds the reconciliation: every affected Receivable gets the reconciliation_hold, its authorized recovery instruction is suspended and new Payment requests there are refused until a resolution. An identical retry answers 200 with the current state.',
      tags: ['Payment reconciliations'],
      answers: { 201: 'Accepted, matched or held', 200: 'An identical retry: the current state' },
      problems: ['payment_reconciliation_conflict', 'payment_not_confirmed'],
    }),
    defineRoute({
      method: 'GET',
      path,
      operationId: 'getPaymentReconciliation',
      summary: 'Read a Payment reconciliation with the allocations of its Payment',
      description:
        "Reads a payment reconciliation: its `status` (`matched` or `held`), its receipt lines, and the Payment's allocations with what every reconciliation of the Payment has acknowledged.",
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
    writeRoute(deps, reconciliations.resolveOperation, {
      method: 'PUT',
      path: `${path}/resolution`,
      idParam: 'externalReconciliationId',
      params: ReconciliationParams,
      operationId: 'putPaymentReconciliationResolution',
      summary: 'Resolve a held Payment reconciliation',
      description:
        "basis matching_evidence is accepted only when matched receipt lines of every reconciliation of the Payment account for the full allocation of every Receivable this reconciliation holds; authorized_correction needs the Source reference of the correction. Releases only this reconciliation's holds, never resumes recovery, and keeps the lines as received. An identical retry answers 200 and changes nothing.",
      tags: ['Payment reconciliations'],
      answers: { 200: 'Resolved, or an identical retry' },
      problems: ['payment_reconciliation_not_found', 'reconciliation_not_held', 'matching_evidence_incomplete'],
    }),
    defineRoute({
      method: 'GET',
      path: base,
      operationId: 'listPaymentReconciliations',
      summary: 'List Payment reconciliations, newest first',
      description:
        'The Payment reconciliations the Source sent, newest accepted first (a resolution does not move one), each exactly as its GET shows it; `externalPaymentRequestId` keeps those of one Payment request, `status` those matched, held or resolved. Pages of `limit` items (1 to 200, default 50): pass `nextCursor` as `cursor` for the next page, until it is null.',
      tags: ['Payment reconciliations'],
      auth: { kind: 'api_key', scopes: ['financial_corrections:read'] },
      params: ClientParams,
      query: ReconciliationListQuery,
      responses: { 200: { schema: ReconciliationList, description: 'A page of Payment reconciliations, newest first' } },
      problems: [],
      public: true,
      handler: async ({ clientCode, query }) => ({ status: 200, body: await reconciliations.list(clientCode, query) }),
    }),
  ]
}
