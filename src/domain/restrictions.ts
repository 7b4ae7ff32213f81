import { z } from 'zod'
import { SourceReference } from './identifiers.ts'

/** docs/design/domain-rules.md, "Restrictions and disputes": `dispute` yields the hold `dispute`; every other type yields `source_restriction`. */
export const RESTRICTION_TYPES = ['dispute', 'bankruptcy', 'hardship', 'legal_hold', 'deceased', 'other'] as const
export const MAX_RESTRICTIONS = 8

export const Restriction = z
  .strictObject({ type: z.enum(RESTRICTION_TYPES), reference: SourceReference.optional() })
  .meta({ id: 'Restriction' })

export const Restrictions = z
  .array(Restriction)
  .max(MAX_RESTRICTIONS)
  .superRefine((list, ctx) => {
    const seen = new Set<string>()
    list.forEach((r, i) => {
      if (seen.has(r.type))
        ctx.addIssue({ code: 'custom', path: [i, 'type'], message: `only one restriction of type ${r.type} is allowed` })
      seen.add(r.type)
    })
  })
  .describe('Source restrictions and Disputes; at most 8, one per type. A PUT replaces them; an omitted list means none.')

export type RestrictionT = z.output<typeof Restriction>

export const RestrictionOut = z.object({ type: z.enum(RESTRICTION_TYPES), reference: z.string().optional() })
