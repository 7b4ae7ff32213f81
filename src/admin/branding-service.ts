import { type Branding, brandingFields } from '../domain/branding.ts'
import { Problem } from '../domain/problems.ts'
import { type Clock, isoNow } from '../domain/time.ts'
import { recordAudit } from '../resources/audit/store.ts'
import { inUnitOfWork } from '../resources/unit-of-work.ts'
import type { Store } from '../store/store.ts'
import { type ClientBrandingRow, findClientBranding, replaceClientBranding } from './branding-store.ts'

/** A client's branding as the operator API answers it: every field, null where not set. */
const brandingView = (row: ClientBrandingRow) => ({
  clientCode: row.client_code,
  ...brandingFields(row.branding),
  updatedAt: row.updated_at,
})

/**
 * The hosted page's branding of a client (docs/operator-api.md, "Branding"). A PUT replaces the whole of it; the
 * audit event names the fields set, the colour and the locale, never the contact details themselves.
 */
export function createBrandingService({ store, clock }: { store: Store; clock: Clock }) {
  return {
    async get(clientCode: string) {
      const row = await findClientBranding(store, clientCode)
      if (!row) throw new Problem('client_not_found', `No client ${clientCode}.`)
      return brandingView(row)
    },

    put(clientCode: string, branding: Branding) {
      return inUnitOfWork(store, async ({ tx }) => {
        const now = isoNow(clock)
        const row = await replaceClientBranding(tx, clientCode, branding, now)
        if (!row) throw new Problem('client_not_found', `No client ${clientCode}.`)
        await recordAudit(tx, {
          action: 'client.branding_updated',
          clientCode,
          targetType: 'client',
          targetId: clientCode,
          details: { fields: Object.keys(branding).sort(), accentColor: branding.accentColor ?? null, locale: branding.locale ?? null },
          change: branding,
          occurredAt: now,
        })
        return brandingView(row)
      })
    },
  }
}

export type BrandingService = ReturnType<typeof createBrandingService>
