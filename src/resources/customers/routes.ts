import { ClientParams, ListQuery } from '../../http/common-schemas.ts'
import { defineRoute, type RouteDef } from '../../http/route.ts'
import { type RouteDeps, writeRoute } from '../operations.ts'
import { CustomerList, CustomerParams, CustomerResponse } from './schema.ts'
import type { CustomerService } from './service.ts'

const base = '/v1/clients/:clientCode/customers'

export function customerRoutes(deps: RouteDeps, customers: CustomerService): RouteDef[] {
  return [
    writeRoute(deps, customers.putOperation, {
      method: 'PUT',
      path: `${base}/:externalCustomerId`,
      idParam: 'externalCustomerId',
      params: CustomerParams,
      operationId: 'putCustomer',
      summary: 'Create or replace a Customer',
      tags: ['Customers'],
      problems: ['contact_update_unsupported'],
    }),
    writeRoute(deps, customers.patchOperation, {
      method: 'PATCH',
      path: `${base}/:externalCustomerId`,
      idParam: 'externalCustomerId',
      params: CustomerParams,
      operationId: 'patchCustomer',
      summary: 'Apply a JSON Merge Patch to a Customer',
      tags: ['Customers'],
      problems: ['customer_not_found', 'contact_update_unsupported'],
      mediaType: 'application/merge-patch+json',
    }),
    defineRoute({
      method: 'GET',
      path: `${base}/:externalCustomerId`,
      operationId: 'getCustomer',
      summary: 'Read a Customer',
      tags: ['Customers'],
      auth: { kind: 'api_key', scopes: ['customers:read'] },
      params: CustomerParams,
      responses: { 200: { schema: CustomerResponse, description: 'The Customer' } },
      problems: ['customer_not_found'],
      public: true,
      oneRead: (db, { clientCode, params }) => customers.get(clientCode, params.externalCustomerId, db),
      handler: async ({ read }) => ({ status: 200, body: read }),
    }),
    defineRoute({
      method: 'GET',
      path: base,
      operationId: 'listCustomers',
      summary: 'List Customers',
      tags: ['Customers'],
      auth: { kind: 'api_key', scopes: ['customers:read'] },
      params: ClientParams,
      query: ListQuery,
      responses: { 200: { schema: CustomerList, description: 'A page of Customers in identifier order' } },
      problems: [],
      public: true,
      async handler({ clientCode, query }) {
        return { status: 200, body: await customers.list(clientCode, query.cursor, query.limit) }
      },
    }),
  ]
}
