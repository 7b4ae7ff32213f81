import mergePatch from 'json-merge-patch'
import { z } from 'zod'
import { canonicalJson } from '../../domain/canonical.ts'
import { fieldProblem, Problem } from '../../domain/problems.ts'
import type { RestrictionT } from '../../domain/restrictions.ts'
import { type Clock, isoNow } from '../../domain/time.ts'
import { decodeCursor, encodeCursor } from '../../http/common-schemas.ts'
import { issuesToErrors, validationProblem } from '../../http/validation.ts'
import { lockIdentity } from '../../store/locks.ts'
import type { Store, Tx } from '../../store/store.ts'
import { appendChange } from '../changes/store.ts'
import { defineOperation, type OperationContext } from '../operations.ts'
import { applyRestrictionChange, receivablesOfCustomer, syncRestrictions } from '../recovery/restrictions.ts'
import { type ContactT, type CustomerResponse, CustomerWrite } from './schema.ts'
import { type CustomerRow, findCustomer, insertCustomerIfNew, listCustomers, updateCustomer } from './store.ts'

export interface CustomerServiceDeps {
  store: Store
  clock: Clock
}

export interface WriteResult<T> {
  status: 200 | 201
  resource: T
}

const notFound = (id: string) => new Problem('customer_not_found', `No Customer ${id} for this client.`)

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

export function createCustomerService({ store, clock }: CustomerServiceDeps) {
  /** The one code path of a Customer write, for the PUT route and a batch record alike. */
  async function putInTx(tx: Tx, clientCode: string, id: string, input: CustomerWrite): Promise<WriteResult<CustomerResponse>> {
    await lockIdentity(tx, clientCode, 'customer', id)
    const now = isoNow(clock)
    // A new Customer is one statement; only an existing one is read, compared and updated.
    const created = await insertCustomerIfNew(tx, clientCode, id, { ...input, contacts: normalizeContacts(input.contacts ?? []) }, now)
    if (created) {
      // A new Customer is responsible for no Receivable yet: its restrictions protect nothing else.
      if (input.restrictions?.length) await syncRestrictions(tx, clientCode, 'customer', id, input.restrictions)
      appendChange(tx, clientCode, { type: 'customer.created', resourceType: 'customer', resourceId: id, revision: 1, occurredAt: now })
      return { status: 201, resource: toCustomerResponse(created) }
    }
    const existing = (await findCustomer(tx, clientCode, id)) as CustomerRow
    const { active, deactivated } = mergeContacts(existing, input.contacts)
    const representation = { ...input, contacts: active }
    const unchanged =
      canonicalJson(representation) === canonicalJson(existing.representation) &&
      canonicalJson(deactivated) === canonicalJson(existing.deactivated_contacts)
    if (unchanged) return { status: 200, resource: toCustomerResponse(existing) }
    const restrictionsChanged =
      canonicalJson(sortedRestrictions(input.restrictions)) !== canonicalJson(sortedRestrictions(existing.representation.restrictions))
    if (restrictionsChanged) {
      // A Customer's restrictions protect every Receivable it is responsible for.
      const affected = await receivablesOfCustomer(tx, clientCode, id)
      await applyRestrictionChange(tx, clientCode, affected, now, async () => {
        await syncRestrictions(tx, clientCode, 'customer', id, input.restrictions ?? [])
      })
    }
    const row = await updateCustomer(tx, clientCode, id, representation, deactivated, now)
    appendChange(tx, clientCode, {
      type: 'customer.updated',
      resourceType: 'customer',
      resourceId: id,
      revision: Number(row.revision),
      occurredAt: now,
    })
    return { status: 200, resource: toCustomerResponse(row) }
  }

  /** The batch-record kind `customer` and the PUT route share this operation. */
  const putOperation = defineOperation({
    kind: 'customer',
    scopes: ['customers:write'],
    body: CustomerWrite,
    async run(tx: Tx, { clientCode, id }: OperationContext, body: CustomerWrite) {
      const { status, resource } = await putInTx(tx, clientCode, id, body)
      return { status, body: async () => resource }
    },
  })

  return {
    putInTx,
    putOperation,

    put(clientCode: string, id: string, input: CustomerWrite) {
      return store.transaction((tx) => putInTx(tx, clientCode, id, input))
    },

    /** RFC 7396 merge patch over the Source representation; the result must be a complete valid Customer. */
    patch(clientCode: string, id: string, patch: Record<string, unknown>) {
      return store.transaction(async (tx) => {
        await lockIdentity(tx, clientCode, 'customer', id)
        const existing = await findCustomer(tx, clientCode, id)
        if (!existing) throw notFound(id)
        const merged = mergePatch.apply(structuredClone(existing.representation), patch) as Record<string, unknown>
        // Deleting `contacts` through the patch deactivates them all (for PUT, omission leaves them alone).
        if (merged.contacts === undefined) merged.contacts = []
        const parsed = CustomerWrite.safeParse(merged)
        if (!parsed.success) throw validationProblem(issuesToErrors(parsed.error.issues), 'The patched Customer')
        return (await putInTx(tx, clientCode, id, parsed.data)).resource
      })
    },

    async get(clientCode: string, id: string): Promise<CustomerResponse> {
      const row = await findCustomer(store, clientCode, id)
      if (!row) throw notFound(id)
      return toCustomerResponse(row)
    },

    async list(clientCode: string, cursor: string | undefined, limit: number) {
      const after = decodeCursor(cursor, z.object({ after: z.string() }))
      if (cursor !== undefined && !after) throw fieldProblem('/query/cursor', 'invalid_format', 'is not a cursor this list returned')
      const rows = await listCustomers(store, clientCode, after?.after, limit + 1)
      const page = rows.slice(0, limit)
      const last = page.at(-1)
      return {
        data: page.map(toCustomerResponse),
        nextCursor: rows.length > limit && last ? encodeCursor({ after: last.external_customer_id }) : null,
      }
    },
  }
}

export type CustomerService = ReturnType<typeof createCustomerService>
