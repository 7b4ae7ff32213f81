import { z } from 'zod'
import { ExternalId, SourceReference } from '../../domain/identifiers.ts'
import { Money, MoneyOut } from '../../domain/money.ts'
import { Timestamp } from '../../domain/time.ts'
import { ClientParams } from '../../http/common-schemas.ts'
import { SafeInteger } from '../receivables/schema.ts'

export type Family = 'adjustment' | 'credit_note' | 'write_off'

/** Per family: its route segment, its `type` value, its allowed reasons, and whether it declares a direction. */
export const FAMILIES = {
  adjustment: { segment: 'adjustments', title: 'Adjustment', reasons: ['billing_correction', 'source_adjustment'], direction: true },
  credit_note: { segment: 'credit-notes', title: 'CreditNote', reasons: ['billing_correction', 'contractual_credit'], direction: false },
  write_off: { segment: 'write-offs', title: 'WriteOff', reasons: ['approved_write_off'], direction: false },
} as const satisfies Record<Family, { segment: string; title: string; reasons: readonly string[]; direction: boolean }>

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
    .meta({ id: `${f.title}Write` })
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
    .meta({ id: f.title })
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
