import { ClientParams, ListQuery } from '../../http/common-schemas.ts'
import { defineRoute, type RouteDef } from '../../http/route.ts'
import { CustomerList, CustomerParams, CustomerPatch, CustomerResponse, CustomerWrite } from './schema.ts'
import type { CustomerService } from './service.ts'

const base = '/v1/clients/:clientCode/customers'

export function customerRoutes(customers: CustomerService): RouteDef[] {
  return [
    defineRoute({
      method: 'PUT',
      path: `${base}/:externalCustomerId`,
      operationId: 'putCustomer',
      summary: 'Create or replace a Customer',
      tags: ['Customers'],
      auth: { kind: 'api_key', scopes: ['customers:write'] },
      params: CustomerParams,
      body: { schema: CustomerWrite, mediaType: 'application/json' },
      responses: {
        201: { schema: CustomerResponse, description: 'Created' },
        200: { schema: CustomerResponse, description: 'Replaced, or an identical retry' },
      },
      problems: ['contact_update_unsupported'],
      public: true,
      async handler({ clientCode, params, body }) {
        const { status, resource } = await customers.put(clientCode, params.externalCustomerId, body)
        return { status, body: resource }
      },
    }),
    defineRoute({
      method: 'PATCH',
      path: `${base}/:externalCustomerId`,
      operationId: 'patchCustomer',
      summary: 'Apply a JSON Merge Patch to a Customer',
      tags: ['Customers'],
      auth: { kind: 'api_key', scopes: ['customers:write'] },
      params: CustomerParams,
      body: { schema: CustomerPatch, mediaType: 'application/merge-patch+json' },
      responses: { 200: { schema: CustomerResponse, description: 'Updated, or a safe no-op' } },
      problems: ['customer_not_found', 'contact_update_unsupported'],
      public: true,
      async handler({ clientCode, params, body }) {
        return { status: 200, body: await customers.patch(clientCode, params.externalCustomerId, body) }
      },
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
      async handler({ clientCode, params }) {
        return { status: 200, body: await customers.get(clientCode, params.externalCustomerId) }
      },
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
