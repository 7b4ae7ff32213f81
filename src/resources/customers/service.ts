import mergePatch from 'json-merge-patch'
import { canonicalJson } from '../../domain/canonical.ts'
import { encodeCursor, IdentifierCursor, readCursor } from '../../domain/cursor.ts'
import { isProblem, Problem } from '../../domain/problems.ts'
import type { RestrictionT } from '../../domain/restrictions.ts'
import { isoNow } from '../../domain/time.ts'
import { issuesToErrors, validationProblem } from '../../http/validation.ts'
import { lockIdentities, lockIdentity } from '../../store/locks.ts'
import type { Queryable } from '../../store/store.ts'
import type { RestrictionRules } from '../holds/restrictions.ts'
import { defineOperation, type OperationContext, type RouteDeps, runOne, type SetOperation, type SetOutcome } from '../operations.ts'
import type { UnitOfWork } from '../unit-of-work.ts'
import { type ContactT, CustomerPatch, CustomerResponse, CustomerWrite, type ErasedCustomerResponse } from './schema.ts'
import {
  type CustomerRow,
  findCustomer,
  insertCustomerIfNew,
  insertCustomersIfNew,
  listCustomers,
  updateCustomer,
  updateCustomers,
} from './store.ts'

/** The database (reads, and each write's transaction), the clock, and the restriction rules a Customer write applies. */
export interface CustomerServiceDeps extends RouteDeps {
  restrictions: Pick<RestrictionRules, 'applyRestrictionChange' | 'receivablesOfCustomer' | 'syncRestrictions'>
}

export interface WriteResult<T> {
  status: 200 | 201
  resource: T
}

const notFound = (id: string) => new Problem('customer_not_found', `No Customer ${id} for this client.`)
/** A write that would bring personal data back to an erased Customer (docs/decisions.md, erasure). */
export const erasedProblem = (id: string) =>
  new Problem('customer_erased', `Customer ${id} was erased; the service takes no personal data for it again.`)

/** How a Customer reads: as held, or (erased) its identifier and when. */
export function toCustomerRead(row: CustomerRow): CustomerResponse | ErasedCustomerResponse {
  if (row.erased_at) return { externalCustomerId: row.external_customer_id, erased: true, erasedAt: row.erased_at }
  return toCustomerResponse(row)
}

export function toCustomerResponse(row: CustomerRow): CustomerResponse {
  const { contacts, ...rest } = row.representation
  return {
    externalCustomerId: row.external_customer_id,
    ...rest,
    contacts: contacts ?? [],
    restrictions: rest.restrictions ?? [],
    revision: Number(row.revision),
    updatedAt: row.updated_at,
  }
}

/** Contacts with ids are kept in id order, so a re-ordered but equal list is not a change. */
function normalizeContacts(contacts: ContactT[]): ContactT[] {
  if (contacts.some((c) => c.externalContactId === undefined)) return contacts
  return [...contacts].sort((a, b) => ((a.externalContactId ?? '') < (b.externalContactId ?? '') ? -1 : 1))
}

/**
 * Contacts are matched by externalContactId: a known id is updated, a new id added, an omitted id
 * deactivated (kept, not returned). They may change only when every existing and submitted contact has
 * an id (spec, endpoint rule 3); an unchanged list is always accepted.
 */
function mergeContacts(
  existing: CustomerRow | undefined,
  submitted: ContactT[] | undefined,
): { active: ContactT[]; deactivated: ContactT[] } {
  const current = existing?.representation.contacts ?? []
  const deactivated = existing?.deactivated_contacts ?? []
  if (submitted === undefined) return { active: current, deactivated }
  const next = normalizeContacts(submitted)
  if (!existing || canonicalJson(next) === canonicalJson(current)) return { active: next, deactivated }
  const missing = [...current, ...next].some((c) => c.externalContactId === undefined)
  if (missing) {
    throw new Problem(
      'contact_update_unsupported',
      'Contacts can change only when every existing and submitted contact has an externalContactId.',
    )
  }
  const submittedIds = new Set(next.map((c) => c.externalContactId))
  const nowDeactivated = current.filter((c) => !submittedIds.has(c.externalContactId))
  const stillDeactivated = deactivated.filter((c) => !submittedIds.has(c.externalContactId))
  const byId = new Map([...stillDeactivated, ...nowDeactivated].map((c) => [c.externalContactId, c]))
  return { active: next, deactivated: [...byId.values()] }
}

function sortedRestrictions(list: readonly RestrictionT[] | undefined) {
  return [...(list ?? [])].sort((a, b) => (a.type < b.type ? -1 : 1))
}

/** What a write of an existing Customer changes: its new representation, its deactivated contacts, its restrictions? */
interface CustomerReplace {
  representation: CustomerRow['representation']
  deactivated: ContactT[]
  restrictionsChanged: boolean
}

/**
 * What a write of an existing Customer does, decided in memory, for the set-based run and the per-record write
 * alike: nothing (an identical retry, or a write equal to what is kept), or a replace. Throws
 * contact_update_unsupported (mergeContacts).
 */
function decideReplace(existing: CustomerRow, input: CustomerWrite): 'unchanged' | CustomerReplace {
  const { active, deactivated } = mergeContacts(existing, input.contacts)
  const representation = { ...input, contacts: active }
  const unchanged =
    canonicalJson(representation) === canonicalJson(existing.representation) &&
    canonicalJson(deactivated) === canonicalJson(existing.deactivated_contacts)
  if (unchanged) return 'unchanged'
  const restrictionsChanged =
    canonicalJson(sortedRestrictions(input.restrictions)) !== canonicalJson(sortedRestrictions(existing.representation.restrictions))
  return { representation, deactivated, restrictionsChanged }
}

export function createCustomerService(deps: CustomerServiceDeps) {
  const { store, clock } = deps
  const { applyRestrictionChange, receivablesOfCustomer, syncRestrictions } = deps.restrictions
  /** The one code path of a Customer write, for the PUT route, the PATCH route and a batch record alike. */
  async function putInTx(
    uow: UnitOfWork,
    clientCode: string,
    id: string,
    input: CustomerWrite,
    /** The existing row, read (and its identity locked) by the set-based run that handed this record over. */
    known?: { existing: CustomerRow; now: string },
  ): Promise<WriteResult<CustomerResponse>> {
    const { tx } = uow
    if (!known) await lockIdentity(tx, clientCode, 'customer', id)
    const now = known?.now ?? isoNow(clock)
    // A new Customer is one statement; only an existing one is read, compared and updated.
    const written = known
      ? { existing: known.existing }
      : await insertCustomerIfNew(tx, clientCode, id, { ...input, contacts: normalizeContacts(input.contacts ?? []) }, now)
    if ('created' in written) {
      const { created } = written
      // A new Customer is responsible for no Receivable yet: its restrictions protect nothing else.
      if (input.restrictions?.length) await syncRestrictions(tx, clientCode, 'customer', id, input.restrictions)
      uow.appendChange(clientCode, { type: 'customer.created', resourceType: 'customer', resourceId: id, revision: 1, occurredAt: now })
      return { status: 201, resource: toCustomerResponse(created) }
    }
    const { existing } = written
    const decided = decideReplace(existing, input)
    if (decided === 'unchanged') return { status: 200, resource: toCustomerResponse(existing) }
    const { representation, deactivated } = decided
    if (decided.restrictionsChanged) {
      // A Customer's restrictions protect every Receivable it is responsible for.
      const affected = await receivablesOfCustomer(tx, clientCode, id)
      await applyRestrictionChange(uow, clientCode, affected, now, async () => {
        await syncRestrictions(tx, clientCode, 'customer', id, input.restrictions ?? [])
      })
    }
    const row = await updateCustomer(tx, clientCode, id, representation, deactivated, now)
    uow.appendChange(clientCode, {
      type: 'customer.updated',
      resourceType: 'customer',
      resourceId: id,
      revision: Number(row.revision),
      occurredAt: now,
    })
    return { status: 200, resource: toCustomerResponse(row) }
  }

  /**
   * The set-based Customer PUT: one statement creates the new Customers and reads the existing ones, the rules
   * run in memory, one statement updates the changed ones. A replace that changes restrictions is `fallback`
   * (it changes the holds of the Customer's Receivables: `putInTx`); a create with restrictions syncs them here.
   */
  const many: SetOperation<CustomerWrite> = {
    keys: (id) => ({ writes: [`customer:${id}`], reads: [] }),
    async runMany(uow, { clientCode, locked }, records, now) {
      const { tx } = uow
      // The identity locks and the insert-or-read the decision needs, sent together: one round trip with BEGIN (the
      // statement runs after the locks are granted, in a snapshot of its own, so it sees what a writer before committed).
      const locking = locked
        ? undefined
        : lockIdentities(
            tx,
            clientCode,
            records.map((r) => ['customer', r.id] as const),
          )
      const [, written] = await Promise.all([
        locking,
        insertCustomersIfNew(
          tx,
          clientCode,
          records.map((r) => ({ id: r.id, representation: { ...r.body, contacts: normalizeContacts(r.body.contacts ?? []) } })),
          now,
        ),
      ])
      const outcomes: SetOutcome[] = []
      const updates: { index: number; id: string; representation: CustomerRow['representation']; deactivated: ContactT[] }[] = []
      for (const [index, { id, body }] of records.entries()) {
        const w = written.get(id) as { created: CustomerRow } | { existing: CustomerRow }
        if ('created' in w) {
          if (body.restrictions?.length) await syncRestrictions(tx, clientCode, 'customer', id, body.restrictions)
          uow.appendChange(clientCode, { type: 'customer.created', resourceType: 'customer', resourceId: id, revision: 1, occurredAt: now })
          const resource = toCustomerResponse(w.created)
          outcomes.push({ status: 201, body: async () => resource })
          continue
        }
        const { existing } = w
        if (existing.erased_at) {
          outcomes.push({ problem: erasedProblem(id) })
          continue
        }
        let decided: ReturnType<typeof decideReplace>
        try {
          decided = decideReplace(existing, body)
        } catch (err) {
          if (!isProblem(err)) throw err
          outcomes.push({ problem: err })
          continue
        }
        if (decided === 'unchanged') {
          const resource = toCustomerResponse(existing)
          outcomes.push({ status: 200, body: async () => resource })
          continue
        }
        // A change is answered by the update below, except a change of restrictions: it changes the holds of the
        // Customer's Receivables, so the per-record write (putInTx) does it.
        outcomes.push({ fallback: true, state: existing })
        if (!decided.restrictionsChanged)
          updates.push({ index, id, representation: decided.representation, deactivated: decided.deactivated })
      }
      const rows = await updateCustomers(tx, clientCode, updates, now)
      for (const { index, id } of updates) {
        const row = rows.get(id) as CustomerRow
        uow.appendChange(clientCode, {
          type: 'customer.updated',
          resourceType: 'customer',
          resourceId: id,
          revision: Number(row.revision),
          occurredAt: now,
        })
        const resource = toCustomerResponse(row)
        outcomes[index] = { status: 200, body: async () => resource }
      }
      return outcomes
    },
  }

  /** The batch-record kind `customer` and the PUT route share this operation: a list of one through `many`. */
  const putOperation = defineOperation({
    kind: 'customer',
    scopes: ['customers:write'],
    body: CustomerWrite,
    response: CustomerResponse,
    source: true,
    many,
    run(uow: UnitOfWork, ctx: OperationContext, body: CustomerWrite) {
      const now = isoNow(clock)
      return runOne(many, uow, ctx, body, now, async (existing) => {
        const { status, resource } = await putInTx(uow, ctx.clientCode, ctx.id, body, { existing: existing as CustomerRow, now })
        return { status, body: async () => resource }
      })
    },
  })

  /** RFC 7396 merge patch over the Source representation; the result must be a complete valid Customer. */
  const patchOperation = defineOperation({
    kind: 'customer_patch',
    scopes: ['customers:write'],
    body: CustomerPatch,
    response: CustomerResponse,
    source: true,
    async run(uow: UnitOfWork, { clientCode, id }: OperationContext, patch: Record<string, unknown>) {
      // The lock and the read after it, sent together (one round trip with BEGIN; the read sees what committed first).
      const [, existing] = await Promise.all([lockIdentity(uow.tx, clientCode, 'customer', id), findCustomer(uow.tx, clientCode, id)])
      if (!existing) throw notFound(id)
      if (existing.erased_at) throw erasedProblem(id)
      const merged = mergePatch.apply(structuredClone(existing.representation), patch) as Record<string, unknown>
      // Deleting `contacts` through the patch deactivates them all (for PUT, omission leaves them alone).
      if (merged.contacts === undefined) merged.contacts = []
      const parsed = CustomerWrite.safeParse(merged)
      if (!parsed.success) throw validationProblem(issuesToErrors(parsed.error.issues), 'The patched Customer')
      // The row read under the lock above: neither a second lock nor a second read.
      const { resource } = await putInTx(uow, clientCode, id, parsed.data, { existing, now: isoNow(clock) })
      return { status: 200 as const, body: async () => resource }
    },
  })

  return {
    putOperation,
    patchOperation,

    async get(clientCode: string, id: string, db: Queryable = store): Promise<CustomerResponse | ErasedCustomerResponse> {
      const row = await findCustomer(db, clientCode, id)
      if (!row) throw notFound(id)
      return toCustomerRead(row)
    },

    async list(clientCode: string, cursor: string | undefined, limit: number) {
      const after = readCursor('customers', cursor, IdentifierCursor, '/query/cursor', 'is not a cursor this list returned')
      const rows = await listCustomers(store, clientCode, after?.after, limit + 1)
      const page = rows.slice(0, limit)
      const last = page.at(-1)
      return {
        data: page.map(toCustomerRead),
        nextCursor: rows.length > limit && last ? encodeCursor('customers', { after: last.external_customer_id }) : null,
      }
    },
  }
}

export type CustomerService = ReturnType<typeof createCustomerService>
