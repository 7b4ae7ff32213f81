import { ClientParams } from '../../http/common-schemas.ts'
import { defineRoute, type RouteDef } from '../../http/route.ts'
import { type RouteDeps, writeRoute } from '../operations.ts'
import { PaymentObservationList, PaymentObservationListQuery, PaymentObservationParams, PaymentObservationResponse } from './schema.ts'
import type { PaymentObservationService } from './service.ts'

const base = '/v1/clients/:clientCode/payment-observations'
const path = `${base}/:externalEventId`

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
    defineRoute({
      method: 'GET',
      path: base,
      operationId: 'listPaymentObservations',
      summary: 'List payment observations, newest first',
      description:
        'The payment observations the Source recorded, newest accepted first, each exactly as its GET shows it; `externalCustomerId` keeps those of one Customer. Pages of `limit` items (1 to 200, default 50): pass `nextCursor` as `cursor` for the next page, until it is null. Observations accepted while you page appear at most once and never move the ones you have not reached yet.',
      tags: ['Payment observations'],
      auth: { kind: 'api_key', scopes: ['payment_observations:read'] },
      params: ClientParams,
      query: PaymentObservationListQuery,
      responses: { 200: { schema: PaymentObservationList, description: 'A page of payment observations, newest first' } },
      problems: [],
      public: true,
      handler: async ({ clientCode, query }) => ({ status: 200, body: await observations.list(clientCode, query) }),
    }),
  ]
}
