import { Problem } from '../../domain/problems.ts'
import { type Clock, isoNow } from '../../domain/time.ts'
import { lockIdentity } from '../../store/locks.ts'
import type { Queryable, Tx } from '../../store/store.ts'
import type { CustomerRow } from '../customers/store.ts'
import { defineOperation, type OperationContext } from '../operations.ts'
import type { UnitOfWork } from '../unit-of-work.ts'
import { ErasureResponse, NoErasureBody } from './schema.ts'
import { type ErasureRow, findErasure, recordErasure, TOMBSTONE } from './store.ts'

/**
 * Erasure of a Customer's personal data (docs/decisions.md, "Erasure of a Customer's personal data"). The request
 * records one fact and tombstones the Customer's own row in its transaction; every other copy (batch records,
 * Payment request texts, audit details) is erased afterwards in bounded chunks by the erasure worker
 * (src/workers/erasure.ts), which resumes where it stopped after a crash and shares the work between instances
 * through a lease per erasure.
 */

/** The personal values of a Customer: names, contact details and free text (never identifiers or types). */
export function personalValues(row: Pick<CustomerRow, 'representation' | 'deactivated_contacts'>): string[] {
  const r = row.representation as unknown as Record<string, unknown>
  const out = new Set<string>()
  const add = (v: unknown) => {
    if (typeof v === 'string' && v !== '' && v !== TOMBSTONE) out.add(v)
  }
  const name = (r.name ?? {}) as Record<string, unknown>
  for (const v of Object.values(name)) add(v)
  for (const c of [...(row.representation.contacts ?? []), ...row.deactivated_contacts]) {
    add(c.fullName)
    if (c.address) for (const [k, v] of Object.entries(c.address)) if (k !== 'type' && k !== 'countryCode') add(v)
    add(c.email?.address)
    add(c.phone?.number)
  }
  for (const x of row.representation.restrictions ?? []) add(x.reference)
  return [...out]
}

/** The Customer as the service keeps it once erased: its identifiers and restriction types (holds stay), nothing personal. */
export function tombstoneOf(row: Pick<CustomerRow, 'representation'>) {
  const r = row.representation
  return {
    type: r.type,
    name: r.type === 'person' ? { firstName: TOMBSTONE, lastName: TOMBSTONE } : { legalName: TOMBSTONE },
    sourceReference: r.sourceReference,
    contacts: [],
    restrictions: (r.restrictions ?? []).map((x) => ({ type: x.type })),
  }
}

/**
 * Replaces every string of `value` that holds one of `values` with the tombstone (a value of 3 or more characters
 * anywhere in it, a shorter one only as the whole string): audit details keep their shape and identifiers.
 */
export function scrub(value: unknown, values: readonly string[]): { value: unknown; changed: boolean } {
  let changed = false
  const walk = (v: unknown): unknown => {
    if (typeof v === 'string') {
      if (values.some((s) => v === s || (s.length >= 3 && v.includes(s)))) {
        changed = true
        return TOMBSTONE
      }
      return v
    }
    if (Array.isArray(v)) return v.map(walk)
    if (v !== null && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, walk(x)]))
    return v
  }
  return { value: walk(value), changed }
}

export function toErasureResponse(row: ErasureRow): ErasureResponse {
  return {
    externalCustomerId: row.external_customer_id,
    status: row.status,
    requestedAt: new Date(row.requested_at).toISOString(),
    erasedAt: row.completed_at ? new Date(row.completed_at).toISOString() : null,
  }
}

export interface ErasureServiceDeps {
  store: Queryable
  clock: Clock
  customers: { findCustomer(db: Queryable, clientCode: string, id: string): Promise<CustomerRow | undefined> }
  /** Told after COMMIT of a newly recorded erasure: the worker takes it up now. */
  onRecorded?: () => void
}

export function createErasureService(deps: ErasureServiceDeps) {
  const { clock, customers } = deps

  /**
   * Records the erasure of the Customer unless one is recorded: true when this call recorded it. Its own row is
   * tombstoned now (revision + 1, a `customer.updated` event); 404 for an unknown Customer.
   */
  async function erase(uow: UnitOfWork, clientCode: string, id: string, cause: ErasureRow['cause'], now: string): Promise<boolean> {
    const tx: Tx = uow.tx
    await lockIdentity(tx, clientCode, 'customer', id)
    const customer = await customers.findCustomer(tx, clientCode, id)
    if (!customer) throw new Problem('customer_not_found', `No Customer ${id} for this client.`)
    if (customer.erased_at) return false
    const strings = personalValues(customer)
    const revision = await recordErasure(tx, clientCode, id, { cause, strings, tombstone: tombstoneOf(customer), now })
    if (revision === undefined) return false
    uow.appendChange(clientCode, { type: 'customer.updated', resourceType: 'customer', resourceId: id, revision, occurredAt: now })
    return true
  }

  /** POST .../customers/{id}/erasure: 202 when recorded now, 200 with its state when it was already. */
  const eraseOperation = defineOperation({
    kind: 'customer_erasure',
    scopes: ['customers:write'],
    body: NoErasureBody,
    response: ErasureResponse,
    source: false,
    async run(uow: UnitOfWork, ctx: OperationContext) {
      const recorded = await erase(uow, ctx.clientCode, ctx.id, 'request', isoNow(clock))
      const row = (await findErasure(uow.tx, ctx.clientCode, ctx.id)) as ErasureRow
      const resource = toErasureResponse(row)
      return {
        status: recorded ? (202 as const) : (200 as const),
        body: async () => resource,
        ...(recorded && deps.onRecorded ? { afterCommit: deps.onRecorded } : {}),
      }
    },
  })

  return { erase, eraseOperation }
}

export type ErasureService = ReturnType<typeof createErasureService>
