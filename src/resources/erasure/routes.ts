import type { RouteDef } from '../../http/route.ts'
import { CustomerParams } from '../customers/schema.ts'
import { type RouteDeps, writeRoute } from '../operations.ts'
import type { ErasureService } from './service.ts'

const DESCRIPTION =
  "Erases the Customer's personal data wherever the service keeps it: its names, contacts, addresses, emails, phones and restriction references, the free text of the Payment requests of the Receivables it is responsible for, its records in batches, and any of its values in audit details. Amounts, identifiers, restriction types (and so its holds) stay. The first request answers 202 and the erasure is done within seconds (`status` `done`, `erasedAt`); any later request answers 200 with its state. From then on the Customer's GET answers `{externalCustomerId, erased: true, erasedAt}` and a PUT, PATCH or batch record of it is refused with 409 `customer_erased`."

export function erasureRoutes(deps: RouteDeps, erasure: ErasureService): RouteDef[] {
  return [
    writeRoute(deps, erasure.eraseOperation, {
      method: 'POST',
      path: '/v1/clients/:clientCode/customers/:externalCustomerId/erasure',
      idParam: 'externalCustomerId',
      params: CustomerParams,
      operationId: 'eraseCustomer',
      summary: "Erase a Customer's personal data",
      description: DESCRIPTION,
      tags: ['Customers'],
      noBody: true,
      answers: { 202: 'Recorded: the erasure is under way', 200: 'Already recorded: its state' },
      problems: ['customer_not_found'],
    }),
    // The operator's, for a debtor's request that reaches the client's operator rather than its Source.
    writeRoute(deps, erasure.eraseOperation, {
      method: 'POST',
      path: '/admin/v1/clients/:clientCode/customers/:externalCustomerId/erasure',
      idParam: 'externalCustomerId',
      params: CustomerParams,
      operationId: 'adminEraseCustomer',
      summary: "Erase a Customer's personal data (operator)",
      description: DESCRIPTION,
      tags: ['Operator'],
      noBody: true,
      answers: { 202: 'Recorded: the erasure is under way', 200: 'Already recorded: its state' },
      problems: ['customer_not_found'],
      auth: 'operator',
    }),
  ]
}
