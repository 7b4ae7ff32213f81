import { z } from 'zod'
import { ExternalId, SourceReference, Text200 } from '../../domain/identifiers.ts'
import { RestrictionOut, Restrictions } from '../../domain/restrictions.ts'
import { Timestamp } from '../../domain/time.ts'
import { ClientParams, listResponse } from '../../http/common-schemas.ts'
import { CUSTOMER_EXAMPLE_ID, customerWriteExample } from '../demo-examples.ts'

/** Allowed values of the contact part `type` fields: decided here, published as enums (docs/decisions.md). */
export const ADDRESS_TYPES = ['home', 'work', 'postal', 'other'] as const
export const EMAIL_TYPES = ['personal', 'work', 'other'] as const
export const PHONE_TYPES = ['mobile', 'home', 'work', 'other'] as const
export const MAX_CONTACTS = 8

const customerExample = {
  externalCustomerId: CUSTOMER_EXAMPLE_ID,
  ...customerWriteExample,
  restrictions: [],
  revision: 1,
  updatedAt: '2026-01-31T09:30:00.000Z',
}

export const Address = z
  .strictObject({
    countryCode: z.string().regex(/^[A-Z]{2}$/, 'must be an ISO 3166-1 alpha-2 code such as GB'),
    line1: Text200,
    line2: Text200.optional(),
    locality: Text200.optional(),
    postalCode: Text200.optional(),
    region: Text200.optional(),
    type: z.enum(ADDRESS_TYPES),
  })
  .meta({ id: 'Address' })

export const Email = z.strictObject({ address: z.email().max(200), type: z.enum(EMAIL_TYPES) }).meta({ id: 'Email' })

export const Phone = z
  .strictObject({
    number: z.string().regex(/^\+[1-9]\d{6,14}$/, 'must be an E.164 number such as +447700900123'),
    type: z.enum(PHONE_TYPES),
  })
  .meta({ id: 'Phone' })

export const Contact = z
  .strictObject({
    externalContactId: ExternalId.optional(),
    fullName: Text200,
    isCustomerSelf: z.boolean(),
    isMain: z.boolean(),
    address: Address.optional(),
    email: Email.optional(),
    phone: Phone.optional(),
  })
  .meta({ id: 'Contact', description: 'At most one address, e-mail and phone per contact.' })

const Contacts = z
  .array(Contact)
  .max(MAX_CONTACTS)
  .superRefine((contacts, ctx) => {
    const seen = new Map<string, number>()
    contacts.forEach((c, i) => {
      if (c.externalContactId === undefined) return
      if (seen.has(c.externalContactId)) {
        ctx.addIssue({ code: 'custom', path: [i, 'externalContactId'], message: `duplicates contacts[${seen.get(c.externalContactId)}]` })
      } else seen.set(c.externalContactId, i)
    })
    const mains = contacts.flatMap((c, i) => (c.isMain ? [i] : []))
    for (const i of mains.slice(1))
      ctx.addIssue({ code: 'custom', path: [i, 'isMain'], message: 'only one contact may be the main contact' })
  })

const PersonName = z.strictObject({ firstName: Text200, lastName: Text200 }).meta({ id: 'PersonName' })
const OrganizationName = z.strictObject({ legalName: Text200 }).meta({ id: 'OrganizationName' })

const PersonCustomer = z.strictObject({
  type: z.literal('person'),
  name: PersonName,
  sourceReference: SourceReference,
  contacts: Contacts.optional(),
  restrictions: Restrictions.optional(),
})
const OrganizationCustomer = z.strictObject({
  type: z.literal('organization'),
  name: OrganizationName,
  sourceReference: SourceReference,
  contacts: Contacts.optional(),
  restrictions: Restrictions.optional(),
})

/** The Source-owned representation, as written by PUT and as the result of a PATCH. */
export const CustomerWrite = z.discriminatedUnion('type', [PersonCustomer, OrganizationCustomer]).meta({
  id: 'CustomerWrite',
  description: 'Customer as sent by the Source. Omitting `contacts` leaves them unchanged.',
  examples: [customerWriteExample],
})
export type CustomerWrite = z.output<typeof CustomerWrite>
export type ContactT = z.output<typeof Contact>

export const CustomerPatch = z.record(z.string(), z.unknown()).meta({
  id: 'CustomerMergePatch',
  description: 'RFC 7396 JSON Merge Patch of CustomerWrite; the result is validated as a complete CustomerWrite.',
  examples: [{ name: { lastName: 'Example-Smith' } }],
})

export const CustomerParams = ClientParams.extend({ externalCustomerId: ExternalId })

export const CustomerResponse = z
  .object({
    externalCustomerId: z.string(),
    type: z.enum(['person', 'organization']),
    name: z.union([PersonName, OrganizationName]),
    sourceReference: z.string(),
    contacts: z.array(Contact),
    restrictions: z.array(RestrictionOut),
    revision: z.number().int(),
    updatedAt: Timestamp,
  })
  .meta({ id: 'Customer', examples: [customerExample] })
export type CustomerResponse = z.output<typeof CustomerResponse>

/** What a Customer whose personal data was erased answers: its identifier and when (docs/decisions.md). */
export const ErasedCustomerResponse = z
  .object({ externalCustomerId: z.string(), erased: z.literal(true), erasedAt: Timestamp })
  .meta({ id: 'ErasedCustomer', examples: [{ externalCustomerId: 'cust-gone-1', erased: true, erasedAt: '2026-02-01T10:00:00.000Z' }] })
export type ErasedCustomerResponse = z.output<typeof ErasedCustomerResponse>

/** A Customer as read: held, or erased. */
export const CustomerRead = z.union([CustomerResponse, ErasedCustomerResponse]).meta({ id: 'CustomerRead', examples: [customerExample] })

export const CustomerList = listResponse(CustomerRead, 'CustomerList')
