/** A node of PostgreSQL's `EXPLAIN (FORMAT JSON)` plan, as the plan tests read it. */
export interface PlanNode {
  'Node Type': string
  'Relation Name'?: string
  'Index Name'?: string
  Plans?: PlanNode[]
}

/**
 * A partition's name as its table's (`receivables_p3` → `receivables`, `batch_records_p3_pkey` → `batch_records_pkey`):
 * on the partitioned layout (DATABASE_LAYOUT=partitioned, src/store/layout.ts names partitions `<table>_p<n>`) a
 * statement naming one client scans that client's partition, and the plan tests judge it as a scan of the table.
 */
const unpartitioned = (name: string) => name.replace(/_p\d+(?=_|$)/, '')

/** Every node of a plan, depth first, with partitions named as their tables. */
export function planNodes(n: PlanNode): PlanNode[] {
  const relation = n['Relation Name']
  const index = n['Index Name']
  const node: PlanNode = {
    ...n,
    ...(relation ? { 'Relation Name': unpartitioned(relation) } : {}),
    ...(index ? { 'Index Name': unpartitioned(index) } : {}),
  }
  return [node, ...(n.Plans ?? []).flatMap(planNodes)]
}
