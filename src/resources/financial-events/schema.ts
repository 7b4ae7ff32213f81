import { z } from 'zod'
import { ExternalId, SourceReference } from '../../domain/identifiers.ts'
import { Money, MoneyOut } from '../../domain/money.ts'
import { Timestamp } from '../../domain/time.ts'
import { ClientParams, ListQuery, listResponse, SafeInteger } from '../../http/common-schemas.ts'
import { RECEIVABLE_EXAMPLE_ID } from '../demo-examples.ts'

export type Family = 'adjustment' | 'credit_note' | 'write_off'

/**
 * Per family: its route segment, its schema name, its name in prose (with its article), its allowed
 * reasons, and whether it declares a direction.
 */
export const FAMILIES = {
  adjustment: {
    segment: 'adjustments',
    title: 'Adjustment',
    noun: 'an adjustment',
    reasons: ['billing_correction', 'source_adjustment'],
    direction: true,
  },
  credit_note: {
    segment: 'credit-notes',
    title: 'CreditNote',
    noun: 'a credit note',
    reasons: ['billing_correction', 'contractual_credit'],
    direction: false,
  },
  write_off: { segment: 'write-offs', title: 'WriteOff', noun: 'a write-off', reasons: ['approved_write_off'], direction: false },
} as const satisfies Record<Family, { segment: string; title: string; noun: string; reasons: readonly string[]; direction: boolean }>

/**
 * Corrections of the demo Receivable, in order: each carries the next sourceRevision (the Receivable is at 3
 * when seeded), so all three can be sent as is to a freshly seeded demo client. 1250.00 - 25.00 - 50.00 - 35.00
 * leaves a source amount of 1140.00.
 */
const eventExamples = {
  adjustment: {
    id: 'adj-demo-1',
    acceptedAt: '2026-02-03T14:00:02.118Z',
    body: {
      type: 'adjustment',
      amount: { amount: '25.00', currency: 'USD' },
      externalReceivableId: RECEIVABLE_EXAMPLE_ID,
      sourceRevision: 4,
      effectiveAt: '2026-02-03T14:00:00Z',
      reason: 'billing_correction',
      sourceReference: 'ledger/adjustments/demo-1',
      direction: 'decrease',
      staffNote: 'January late fee was charged twice; the duplicate is reversed.',
    },
  },
  credit_note: {
    id: 'cn-demo-1',
    acceptedAt: '2026-02-05T10:15:01.406Z',
    body: {
      type: 'credit_note',
      amount: { amount: '50.00', currency: 'USD' },
      externalReceivableId: RECEIVABLE_EXAMPLE_ID,
      sourceRevision: 5,
      effectiveAt: '2026-02-05T10:15:00Z',
      reason: 'contractual_credit',
      sourceReference: 'ledger/credit-notes/demo-1',
    },
  },
  write_off: {
    id: 'wo-demo-1',
    acceptedAt: '2026-02-06T16:45:03.927Z',
    body: {
      type: 'write_off',
      amount: { amount: '35.00', currency: 'USD' },
      externalReceivableId: RECEIVABLE_EXAMPLE_ID,
      sourceRevision: 6,
      effectiveAt: '2026-02-06T16:45:00Z',
      reason: 'approved_write_off',
      sourceReference: 'ledger/write-offs/demo-1',
    },
  },
} as const

/** The example id of each family's event, for the README and the examples test. */
export const EVENT_EXAMPLE_IDS = {
  adjustment: eventExamples.adjustment.id,
  credit_note: eventExamples.credit_note.id,
  write_off: eventExamples.write_off.id,
} as const satisfies Record<Family, string>

function requestSchema<F extends Family>(family: F) {
  const f = FAMILIES[family]
  return z
    .strictObject({
      type: z.literal(family),
      amount: Money,
      externalReceivableId: ExternalId,
      sourceRevision: SafeInteger,
      effectiveAt: Timestamp,
      reason: z.enum(f.reasons as unknown as [string, ...string[]]),
      sourceReference: SourceReference,
      ...(f.direction ? { direction: z.enum(['increase', 'decrease']) } : {}),
      staffNote: z.string().min(1).max(2000).optional().describe('Private staff content: stored with the event, never returned.'),
    })
    .meta({ id: `${f.title}Write`, examples: [eventExamples[family].body] })
}

/** The response echoes the request without its private staffNote. */
function responseExample(family: Family) {
  const { staffNote: _private, ...body } = eventExamples[family].body as { staffNote?: string }
  return { externalEventId: eventExamples[family].id, ...body, acceptedAt: eventExamples[family].acceptedAt }
}

function responseSchema(family: Family) {
  const f = FAMILIES[family]
  return z
    .object({
      externalEventId: z.string(),
      type: z.literal(family),
      amount: MoneyOut,
      externalReceivableId: z.string(),
      sourceRevision: z.number().int(),
      effectiveAt: z.string(),
      reason: z.string(),
      sourceReference: z.string(),
      ...(f.direction ? { direction: z.enum(['increase', 'decrease']) } : {}),
      acceptedAt: Timestamp,
    })
    .meta({ id: f.title, examples: [responseExample(family)] })
}

export const EventWrite = {
  adjustment: requestSchema('adjustment'),
  credit_note: requestSchema('credit_note'),
  write_off: requestSchema('write_off'),
}
export const EventResponse = {
  adjustment: responseSchema('adjustment'),
  credit_note: responseSchema('credit_note'),
  write_off: responseSchema('write_off'),
}

export type EventWriteBody = {
  type: Family
  amount: Money
  externalReceivableId: string
  sourceRevision: number
  effectiveAt: string
  reason: string
  sourceReference: string
  direction?: 'increase' | 'decrease'
  staffNote?: string
}

export const EventParams = ClientParams.extend({ externalEventId: ExternalId })

export const EventListQuery = ListQuery.extend({
  externalReceivableId: ExternalId.optional().describe('Only the events of this Receivable.'),
})
export const EventList = {
  adjustment: listResponse(EventResponse.adjustment, 'AdjustmentList'),
  credit_note: listResponse(EventResponse.credit_note, 'CreditNoteList'),
  write_off: listResponse(EventResponse.write_off, 'WriteOffList'),
}
