import type { Store } from '../../src/store/store.ts'

/**
 * A store that counts the statements it runs: inside transactions (BEGIN and COMMIT included) and outside them
 * (store.query). The write path's statement counts are asserted through it (test/resources/write-path.test.ts),
 * so a regression shows.
 */
export interface CountingStore extends Store {
  /** Statements run inside transactions since the last reset, BEGIN and COMMIT included. */
  readonly inTransactions: string[]
  /** Statements run outside any transaction since the last reset. */
  readonly outside: string[]
  reset(): void
}

export function countingStore(inner: Store): CountingStore {
  const inTransactions: string[] = []
  const outside: string[] = []
  return {
    kind: inner.kind,
    inTransactions,
    outside,
    reset() {
      inTransactions.length = 0
      outside.length = 0
    },
    query(sql, params) {
      outside.push(sql)
      return inner.query(sql, params)
    },
    exec: (sql) => inner.exec(sql),
    transaction(fn) {
      return inner.transaction(async (tx) => {
        inTransactions.push('BEGIN')
        const result = await fn({
          ...tx,
          query(sql, params) {
            inTransactions.push(sql)
            return tx.query(sql, params)
          },
        })
        inTransactions.push('COMMIT')
        return result
      })
    },
    close: () => inner.close(),
  }
}
