import { z } from 'zod'
import { ExternalId } from '../../domain/identifiers.ts'
import { Money, MoneyOut } from '../../domain/money.ts'
import { Timestamp } from '../../domain/time.ts'
import { ClientParams } from '../../http/common-schemas.ts'
import { SafeInteger } from '../receivables/schema.ts'

export const MAX_SNAPSHOT_BALANCES = 100
export const BALANCE_OUTCOMES = ['applied', 'stale', 'unknown_receivable'] as const

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
  .meta({ id: 'BalanceSnapshotWrite', description: 'An ordered, immutable Source balance snapshot of at most 100 Receivables.' })
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
  .meta({ id: 'BalanceSnapshot' })
