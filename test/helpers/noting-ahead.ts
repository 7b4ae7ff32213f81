import type { AheadOfBegin } from '../../src/store/store.ts'

/**
 * `ahead` (a write's gate, sent before BEGIN: src/store/store.ts, AheadOfBegin) with each statement it sends told to
 * `note` first: the test stores that record statements record the gate's as they record every other one.
 */
export function notingAhead(
  ahead: AheadOfBegin | undefined,
  note: (sql: string, params: readonly unknown[] | undefined) => void,
): AheadOfBegin | undefined {
  return (
    ahead &&
    ((connection) =>
      ahead({
        query(sql, params, options) {
          note(sql, params)
          return connection.query(sql, params, options)
        },
        exec: (sql) => connection.exec(sql),
      }))
  )
}
