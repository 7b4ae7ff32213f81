import type { Store } from '../../src/store/store.ts'
import { notingAhead } from './noting-ahead.ts'

/** A statement a capturing store kept, with the parameters it was sent with. */
export interface SentStatement {
  sql: string
  params: readonly unknown[]
}

/**
 * `inner`, keeping in `sent` every statement for which `keep` is true (inside transactions and out): the plan tests
 * EXPLAIN exactly what the app sent, with its own parameters.
 */
export function capturingStore(inner: Store, keep: (sql: string) => boolean, sent: SentStatement[]): Store {
  const record = (sql: string, params: readonly unknown[] | undefined) => {
    if (keep(sql)) sent.push({ sql, params: params ?? [] })
  }
  return {
    kind: inner.kind,
    query(sql, params, options) {
      record(sql, params)
      return inner.query(sql, params, options)
    },
    exec: (sql) => inner.exec(sql),
    transaction: (fn, ahead) =>
      inner.transaction(
        (tx) =>
          fn({
            serialized: tx.serialized,
            exec: (sql) => tx.exec(sql),
            query(sql, params, options) {
              record(sql, params)
              return tx.query(sql, params, options)
            },
          }),
        notingAhead(ahead, record),
      ),
    close: () => inner.close(),
  }
}
