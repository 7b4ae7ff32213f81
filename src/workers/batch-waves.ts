/**
 * The wave plan of a batch chunk (issue 11, set-based write path). The records of a chunk run as if one after
 * another in array order; a wave is a set of them that may run together, set-based, with the same result:
 *
 * - every record a wave's record depends on (`dependsOn`) is already done (it ran in an earlier wave or chunk);
 * - no record of a wave touches a resource that an earlier record still to run touches: a record that writes
 *   a key conflicts with every earlier record that writes or reads it, and a record that reads a key with every
 *   earlier record that writes it (two reads never conflict). So records of one resource keep array order;
 * - a `barrier` record (an operation without a set-based form, or one whose set-based run said `fallback`)
 *   runs alone through the per-record path, after every earlier record and before every later one.
 *
 * The plan is greedy over the records still to run, in array order: the first wave takes every record that
 * conflicts with no earlier record still to run, and stops at the first barrier.
 */
export interface WaveItem {
  /** The record's id in its batch (what `dependsOn` names). */
  recordId: string
  dependsOn: readonly string[]
  /** Keys (`kind:id`) the record writes and reads; undefined for a record with nothing to write (a refused one). */
  keys: { writes: readonly string[]; reads: readonly string[] } | undefined
  barrier: boolean
}

/**
 * The next step for the records still to run (`remaining`, array order): a barrier to run alone, or the indexes
 * (into `remaining`) of the next wave. `remaining` must not be empty.
 */
export function nextWave(remaining: readonly WaveItem[]): { barrier: number } | { wave: number[] } {
  if ((remaining[0] as WaveItem).barrier) return { barrier: 0 }
  const pending = new Set(remaining.map((r) => r.recordId))
  const written = new Set<string>()
  const read = new Set<string>()
  const wave: number[] = []
  for (const [i, item] of remaining.entries()) {
    if (item.barrier) break
    const writes = item.keys?.writes ?? []
    const reads = item.keys?.reads ?? []
    const ready =
      item.dependsOn.every((d) => !pending.has(d)) &&
      writes.every((k) => !written.has(k) && !read.has(k)) &&
      reads.every((k) => !written.has(k))
    if (ready) wave.push(i)
    for (const k of writes) written.add(k)
    for (const k of reads) read.add(k)
    // Every record still to run, this wave's included, stays in `pending`: a record depending on it waits.
  }
  return { wave }
}
