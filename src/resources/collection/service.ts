import { z } from 'zod'
import { HOLD_CATEGORIES, type Hold } from '../../domain/holds.ts'
import { MoneyOut, money } from '../../domain/money.ts'
import { type Clock, isoNow, Timestamp } from '../../domain/time.ts'
import type { Queryable } from '../../store/store.ts'
import { collectionGroups } from './store.ts'

const HoldCounts = z.object(Object.fromEntries(HOLD_CATEGORIES.map((h) => [h, z.number().int()])) as Record<Hold, z.ZodNumber>)

export const CollectionSummary = z
  .object({
    asOf: Timestamp,
    receivables: z.object({ total: z.number().int(), active: z.number().int(), paused: z.number().int(), closed: z.number().int() }),
    amounts: z
      .array(
        z.object({
          currency: z.string(),
          status: z.enum(['active', 'paused', 'closed']),
          count: z.number().int(),
          sourceAmount: MoneyOut,
          workingAmount: MoneyOut,
        }),
      )
      .describe('Per currency and status: counts and summed source and working amounts (never mixed across currencies).'),
    recovery: z.object({
      held: z.number().int().describe('Receivables with at least one hold'),
      notHeld: z.number().int(),
      holds: HoldCounts.describe('Receivables carrying each hold category'),
    }),
  })
  .meta({
    id: 'CollectionSummary',
    examples: [
      {
        asOf: '2026-01-31T09:45:00.000Z',
        receivables: { total: 1, active: 1, paused: 0, closed: 0 },
        amounts: [
          {
            currency: 'USD',
            status: 'active',
            count: 1,
            sourceAmount: { amount: '1250.00', currency: 'USD' },
            workingAmount: { amount: '1250.00', currency: 'USD' },
          },
        ],
        recovery: {
          held: 1,
          notHeld: 0,
          holds: {
            recovery_not_authorized: 1,
            collection_not_enabled: 1,
            source_restriction: 0,
            dispute: 0,
            source_stale: 0,
            other_protection: 0,
            reconciliation_hold: 0,
          },
        },
      },
    ],
  })

/**
 * Computed in the store: one GROUP BY over receivable_hold_facts with the same hold predicates the
 * Receivable read uses, so counts here and holds there cannot disagree. Nothing is loaded per Receivable.
 */
export function createCollectionSummary({ clock }: { clock: Clock }) {
  return async (db: Queryable, clientCode: string) => {
    const rows = await collectionGroups(db, clientCode)
    const receivables = { total: 0, active: 0, paused: 0, closed: 0 }
    const holds = Object.fromEntries(HOLD_CATEGORIES.map((h) => [h, 0])) as Record<Hold, number>
    let held = 0
    for (const r of rows) {
      receivables.total += r.n
      receivables[r.status] += r.n
      held += r.held
      for (const h of HOLD_CATEGORIES) holds[h] += r[`hold_${h}`] ?? 0
    }
    return {
      asOf: isoNow(clock),
      receivables,
      amounts: rows.map((r) => ({
        currency: r.currency,
        status: r.status,
        count: r.n,
        sourceAmount: money(BigInt(r.source), r.currency),
        workingAmount: money(BigInt(r.working), r.currency),
      })),
      recovery: { held, notHeld: receivables.total - held, holds },
    }
  }
}
