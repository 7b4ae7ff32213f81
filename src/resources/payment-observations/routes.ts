import { defineRoute, type RouteDef } from '../../http/route.ts'
import { type RouteDeps, writeRoute } from '../operations.ts'
import { PaymentObservationParams, PaymentObservationResponse } from './schema.ts'
import type { PaymentObservationService } from './service.ts'

const path = '/v1/clients/:clientCode/payment-observations/:externalEventId'

export function paymentObservationRoutes(deps: RouteDeps, observations: PaymentObservationService): RouteDef[] {
  return [
    writeRoute(deps, observations.put, {
      method: 'PUT',
      path,
      idParam: 'externalEventId',
      params: PaymentObservationParams,
      operationId: 'putPaymentObservation',
      summary: 'Record a payment observation (payment, refund or reversal)',
      description: 'Immutable evidence. It never moves the financial position; unallocated funds are kept apart as unappliedAmount.',
      tags: ['Payment observations'],
      problems: ['payment_observation_conflict'],
    }),
    defineRoute({
      method: 'GET',
      path,
      operationId: 'getPaymentObservation',
      summary: 'Read a payment observation',
      description:
        'Reads one payment observation as recorded. Observations are evidence of money the Source saw (a payment, refund or reversal): they appear in the change feed but never move the financial position.',
      tags: ['Payment observations'],
      auth: { kind: 'api_key', scopes: ['payment_observations:read'] },
      params: PaymentObservationParams,
      responses: { 200: { schema: PaymentObservationResponse, description: 'The payment observation' } },
      problems: ['payment_observation_not_found'],
      public: true,
      oneRead: (db, { clientCode, params }) => observations.get(clientCode, params.externalEventId, db),
      handler: async ({ read }) => ({ status: 200, body: read }),
    }),
  ]
}
