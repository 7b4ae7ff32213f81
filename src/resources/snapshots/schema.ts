import { z } from 'zod'
import { ExternalId } from '../../domain/identifiers.ts'
import { Money, MoneyOut } from '../../domain/money.ts'
import { Timestamp } from '../../domain/time.ts'
import { ClientParams, SafeInteger } from '../../http/common-schemas.ts'
import { BATCH_RECEIVABLE_EXAMPLE_ID, RECEIVABLE_EXAMPLE_ID } from '../demo-examples.ts'

export const MAX_SNAPSHOT_BALANCES = 100
export const BALANCE_OUTCOMES = ['applied', 'stale', 'unknown_receivable'] as const

/**
 * The Source's balances after the corrections and the payment: 1140.00 - 150.00 leaves 990.00 on the demo
 * Receivable (at sourceRevision 6 before it); the batch example's Receivable is at sourceRevision 1.
 */
export const SNAPSHOT_EXAMPLE_ID = 'snap-demo-1'
const snapshotWriteExample = {
  asOf: '2026-02-11T06:00:00Z',
  feedMode: 'transaction',
  sourcePosition: 1300,
  balances: [
    { externalReceivableId: RECEIVABLE_EXAMPLE_ID, recoverableAmount: { amount: '990.00', currency: 'USD' }, sourceRevision: 7 },
    { externalReceivableId: BATCH_RECEIVABLE_EXAMPLE_ID, recoverableAmount: { amount: '4200.00', currency: 'USD' }, sourceRevision: 2 },
  ],
} as const

export const BalanceSnapshotWrite = z
  .strictObject({
    asOf: Timestamp,
    feedMode: z.enum(['transaction', 'snapshot_only']),
    sourcePosition: SafeInteger,
    balances: z
      .array(z.strictObject({ externalReceivableId: ExternalId, recoverableAmount: Money, sourceRevision: SafeInteger }))
      .min(1)
      .max(MAX_SNAPSHOT_BALANCES)
      .superRefine((balances, ctx) => {
        const seen = new Set<string>()
        balances.forEach((b, i) => {
          if (seen.has(b.externalReceivableId))
            ctx.addIssue({ code: 'custom', path: [i, 'externalReceivableId'], message: 'appears twice' })
          seen.add(b.externalReceivableId)
        })
      }),
  })
  .meta({
    id: 'BalanceSnapshotWrite',
    description: 'An ordered, immutable Source balance snapshot of at most 100 Receivables.',
    examples: [snapshotWriteExample],
  })
export type BalanceSnapshotWrite = z.output<typeof BalanceSnapshotWrite>

export const BalanceSnapshotParams = ClientParams.extend({ externalSnapshotId: ExternalId })

export const BalanceSnapshot = z
  .object({
    externalSnapshotId: z.string(),
    acceptedAt: Timestamp,
    asOf: Timestamp,
    feedMode: z.enum(['transaction', 'snapshot_only']),
    sourcePosition: z.number().int(),
    balances: z.array(
      z.object({
        externalReceivableId: z.string(),
        outcome: z.enum(BALANCE_OUTCOMES),
        recoverableAmount: MoneyOut,
        sourceRevision: z.number().int(),
      }),
    ),
  })
  .meta({
    id: 'BalanceSnapshot',
    examples: [
      {
        externalSnapshotId: SNAPSHOT_EXAMPLE_ID,
        acceptedAt: '2026-02-11T06:00:02.771Z',
        asOf: snapshotWriteExample.asOf,
        feedMode: snapshotWriteExample.feedMode,
        sourcePosition: snapshotWriteExample.sourcePosition,
        balances: snapshotWriteExample.balances.map((b) => ({ ...b, outcome: 'applied' })),
      },
    ],
  })
