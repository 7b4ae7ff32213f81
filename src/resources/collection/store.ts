import { holdPredicates } from '../../domain/holds.ts'
import type { Queryable } from '../../store/store.ts'

export interface GroupRow {
  status: 'active' | 'paused' | 'closed'
  currency: string
  n: number
  source: string
  working: string
  held: number
  [hold: `hold_${string}`]: number
}

/** Counts and amounts per status and currency, with the count of each hold: one GROUP BY over the hold facts. */
export async function collectionGroups(db: Queryable, clientCode: string): Promise<GroupRow[]> {
  const predicates = holdPredicates()
  return db.query<GroupRow>(
    `SELECT h.status, h.currency, count(*)::int AS n, sum(h.source_amount_minor)::text AS source,
            sum(working_amount_minor(h.source_amount_minor, h.confirmed_unreconciled_minor, r.acknowledged_undeclared_minor))::text AS working,
            count(*) FILTER (WHERE ${Object.values(predicates).join(' OR ')})::int AS held,
            ${Object.entries(predicates)
              .map(([hold, p]) => `count(*) FILTER (WHERE ${p})::int AS hold_${hold}`)
              .join(', ')}
       FROM receivable_hold_facts h
       JOIN receivables r ON r.client_code = h.client_code AND r.external_receivable_id = h.external_receivable_id
      WHERE h.client_code = $1
      GROUP BY h.status, h.currency ORDER BY h.currency, h.status`,
    [clientCode],
  )
}
