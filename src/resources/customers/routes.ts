import { ClientParams, ListQuery } from '../../http/common-schemas.ts'
import { defineRoute, type RouteDef } from '../../http/route.ts'
import { type RouteDeps, writeRoute } from '../operations.ts'
import { CustomerList, CustomerParams, CustomerRead } from './schema.ts'
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
      description:
        'Creates the Customer, or replaces it whole: the body is the complete Customer (a person or an organization, its contacts and restrictions). An identical retry answers 200 and changes nothing; any accepted change adds 1 to its `revision` and puts an event on the change feed.',
      tags: ['Customers'],
      problems: ['contact_update_unsupported', 'customer_erased'],
    }),
    writeRoute(deps, customers.patchOperation, {
      method: 'PATCH',
      path: `${base}/:externalCustomerId`,
      idParam: 'externalCustomerId',
      params: CustomerParams,
      operationId: 'patchCustomer',
      summary: 'Apply a JSON Merge Patch to a Customer',
      description:
        'Changes part of an existing Customer with an RFC 7396 JSON Merge Patch; the result must be a complete, valid Customer, else 422 at the pointer of the first bad field. Use it when the Source sends only what changed; a PUT of the whole Customer does the same.',
      tags: ['Customers'],
      problems: ['customer_not_found', 'contact_update_unsupported', 'customer_erased'],
      mediaType: 'application/merge-patch+json',
    }),
    defineRoute({
      method: 'GET',
      path: `${base}/:externalCustomerId`,
      operationId: 'getCustomer',
      summary: 'Read a Customer',
      description:
        'Reads one Customer as the service holds it, with its `revision` and `updatedAt`. Contacts and restrictions are returned as last written. A Customer whose personal data was erased answers only `{externalCustomerId, erased: true, erasedAt}`.',
      tags: ['Customers'],
      auth: { kind: 'api_key', scopes: ['customers:read'] },
      params: CustomerParams,
      responses: { 200: { schema: CustomerRead, description: 'The Customer, or what is left of an erased one' } },
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
      description:
        "Lists the client's Customers a page at a time (`limit` 1 to 200, default 50); pass the page's `nextCursor` as `cursor` for the next page, until it is null. Each item is as its GET returns it.",
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
