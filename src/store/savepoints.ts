import type { Tx } from './store.ts'

/**
 * Savepoints inside a transaction, for work that may be undone alone (a batch chunk's set-based run, one record
 * of it, a unit of work's optimistic flush). Names are fixed identifiers chosen by the caller, never data.
 */
export type SavepointName = 'batch_chunk' | 'batch_record'

export async function setSavepoint(tx: Tx, name: SavepointName): Promise<void> {
  await tx.query(`SAVEPOINT ${name}`)
}

export async function rollbackToSavepoint(tx: Tx, name: SavepointName): Promise<void> {
  await tx.query(`ROLLBACK TO SAVEPOINT ${name}`)
}
