import { loadActiveGrant } from './access/store.ts'
import type { App } from './app.ts'
import { SCOPES } from './domain/scopes.ts'
import { type Clock, isoNow, systemClock } from './domain/time.ts'
import { existingCustomerIds } from './resources/customers/store.ts'
import { CUSTOMER_EXAMPLE_ID, customerWriteExample, RECEIVABLE_EXAMPLE_ID, receivableWriteExample } from './resources/demo-examples.ts'
import { executeWrite, runOperation } from './resources/operations.ts'
import { ReceivableWrite } from './resources/receivables/schema.ts'
import { findReceivableCore } from './resources/receivables/store.ts'
import { inUnitOfWork } from './resources/unit-of-work.ts'
import { claimSetting } from './store/settings.ts'
import type { Store } from './store/store.ts'

export const DEMO_CLIENT = 'demo'
const DEMO_INTEGRATION = 'demo-integration'

/**
 * The sandbox demo, seeded once: client `demo`, integration `demo-integration`, a grant with every
 * scope, one API key (returned to print once), and the OpenAPI document's examples to read back: the
 * Customer `cust-demo-1` and the Receivable `rcv-demo-1` with its financial position. The examples are
 * the very objects the document publishes, so each request example can be sent as is to the demo.
 *
 * Each part is claimed by a settings row, so a restart seeds nothing twice; the Receivable has its own
 * claim so that a demo seeded before it existed gains it on the next start.
 */
export async function seedDemo(store: Store, app: App, clock: Clock = systemClock): Promise<{ apiKey: string } | null> {
  const seeded = await seedAccess(store, app, clock)
  await seedReceivable(store, app, clock)
  return seeded
}

async function seedAccess(store: Store, app: App, clock: Clock): Promise<{ apiKey: string } | null> {
  if (!(await claimSetting(store, 'demo_seeded', 'true'))) return null
  const { admin, customers } = app.services
  await admin.putClient(DEMO_CLIENT, { name: 'Demo Credit Union', collectionEnabled: false })
  await admin.putIntegration(DEMO_INTEGRATION, { name: 'Demo accounting Source' })
  await admin.putGrant(DEMO_INTEGRATION, DEMO_CLIENT, { scopes: [...SCOPES] })
  const key = await admin.createApiKey(DEMO_INTEGRATION, { name: 'Demo key' })
  const grant = await loadActiveGrant(store, DEMO_INTEGRATION, DEMO_CLIENT)
  if (grant)
    await executeWrite(
      { store, clock },
      customers.putOperation,
      { clientCode: DEMO_CLIENT, grant, id: CUSTOMER_EXAMPLE_ID },
      customerWriteExample,
    )
  return { apiKey: key.apiKey }
}

/**
 * Written through the Receivable's own write operation under the demo grant, as its PUT would be. The claim
 * and the write share one transaction; a demo whose grant, Customer or Receivable was changed since is left
 * as it is. The unit of work is flushed before COMMIT (inUnitOfWork).
 */
async function seedReceivable(store: Store, app: App, clock: Clock): Promise<void> {
  await inUnitOfWork(store, async (uow) => {
    const { tx } = uow
    if (!(await claimSetting(tx, 'demo_receivable_seeded', 'true'))) return
    const grant = await loadActiveGrant(tx, DEMO_INTEGRATION, DEMO_CLIENT)
    if (!grant?.scopes.has('receivables:write')) return
    if ((await existingCustomerIds(tx, DEMO_CLIENT, [CUSTOMER_EXAMPLE_ID])).size === 0) return
    if (await findReceivableCore(tx, DEMO_CLIENT, RECEIVABLE_EXAMPLE_ID)) return
    await runOperation(
      uow,
      app.services.receivables.put,
      { clientCode: DEMO_CLIENT, grant, id: RECEIVABLE_EXAMPLE_ID },
      ReceivableWrite.parse(receivableWriteExample),
      isoNow(clock),
    )
  })
}
