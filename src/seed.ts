import type { App } from './app.ts'
import { SCOPES } from './domain/scopes.ts'
import type { Store } from './store/store.ts'

/**
 * The sandbox demo, seeded once: client `demo`, integration `demo-integration`, a grant with every
 * scope, one API key (returned to print once) and a demo Customer to read back.
 */
export async function seedDemo(store: Store, app: App): Promise<{ apiKey: string } | null> {
  const claimed = await store.query(
    `INSERT INTO settings (key, value) VALUES ('demo_seeded', 'true') ON CONFLICT (key) DO NOTHING RETURNING key`,
  )
  if (claimed.length === 0) return null
  const { admin, customers } = app.services
  await admin.putClient('demo', { name: 'Demo Credit Union', collectionEnabled: false })
  await admin.putIntegration('demo-integration', { name: 'Demo accounting Source' })
  await admin.putGrant('demo-integration', 'demo', { scopes: [...SCOPES] })
  const key = await admin.createApiKey('demo-integration')
  await customers.put('demo', 'cust-demo-1', {
    type: 'person',
    name: { firstName: 'Ada', lastName: 'Example' },
    sourceReference: 'ledger/customers/demo-1',
    contacts: [
      {
        externalContactId: 'contact-demo-1',
        fullName: 'Ada Example',
        isCustomerSelf: true,
        isMain: true,
        email: { address: 'ada@example.com', type: 'personal' },
      },
    ],
  })
  return { apiKey: key.apiKey }
}
