import type { Clock } from '../../src/domain/time.ts'
import type { Queryable, Store } from '../../src/store/store.ts'
import { startTestApp, type TestApp } from './app.ts'
import { createTestDatabase, type TestDatabase } from './store.ts'

/**
 * A store that counts the statements it runs: inside transactions (BEGIN and COMMIT included) and outside them
 * (store.query), and the round trips of its transactions. The write path's statement and round-trip counts are
 * asserted through it (test/resources/write-path.test.ts), so a regression shows.
 *
 * A round trip is a group of statements sent before any of their answers is awaited (src/store/postgres.ts sends
 * them pipelined): a statement sent after an answer came in (since the last statement was sent) starts one. BEGIN
 * leaves with the transaction's first statements (in their round trip), COMMIT is one of its own unless sent early
 * (`Tx.commit`, with the statements sent just before it: PostgreSQL). Counted from how
 * the code sends its statements, the same on both stores (PGlite runs each as one call into its backend all the same).
 */
export interface CountingStore extends Store {
  /** Statements run inside transactions since the last reset, BEGIN and COMMIT included. */
  readonly inTransactions: string[]
  /** Round trips of the transactions since the last reset, BEGIN's and COMMIT's included. */
  readonly roundTrips: number
  /** Statements run outside any transaction since the last reset. */
  readonly outside: string[]
  /**
   * Statements sent ahead of a transaction's BEGIN on its connection (a write's gate: src/store/store.ts,
   * AheadOfBegin) since the last reset: they travel in the transaction's first round trip.
   */
  readonly ahead: string[]
  reset(): void
}

export function countingStore(inner: Store): CountingStore {
  const inTransactions: string[] = []
  const outside: string[] = []
  const ahead: string[] = []
  let roundTrips = 0
  return {
    kind: inner.kind,
    inTransactions,
    outside,
    ahead,
    get roundTrips() {
      return roundTrips
    },
    reset() {
      inTransactions.length = 0
      outside.length = 0
      ahead.length = 0
      roundTrips = 0
    },
    query(sql, params, options) {
      outside.push(sql)
      return inner.query(sql, params, options)
    },
    exec: (sql) => inner.exec(sql),
    transaction(fn, sentAhead) {
      const counted =
        sentAhead &&
        ((connection: Queryable) =>
          sentAhead({
            query(sql, params, options) {
              ahead.push(sql)
              return connection.query(sql, params, options)
            },
            exec: (sql) => connection.exec(sql),
          }))
      return inner.transaction(async (tx) => {
        inTransactions.push('BEGIN')
        // BEGIN leaves with the first statement. A statement starts a round trip when an answer has come in since
        // the last one was sent (the code sent it after hearing back), and joins the last one's otherwise: statements
        // sent one after another with no answer between them leave together, whatever is still unanswered.
        let begun = false
        let answered = true
        let committed = false
        const send = () => {
          if (answered) roundTrips++
          answered = false
        }
        const result = await fn({
          ...tx,
          async query(sql, params, options) {
            inTransactions.push(sql)
            send()
            begun = true
            try {
              return await tx.query(sql, params, options)
            } finally {
              answered = true
            }
          },
          // COMMIT sent early (Tx.commit, PostgreSQL only) travels with the statements sent just before it.
          ...(tx.commit
            ? {
                commit() {
                  tx.commit?.()
                  committed = true
                  inTransactions.push('COMMIT')
                  send()
                },
              }
            : {}),
        })
        if (!begun) roundTrips++
        if (!committed) {
          inTransactions.push('COMMIT')
          roundTrips++
        }
        return result
      }, counted)
    },
    close: () => inner.close(),
  }
}

/**
 * The setup of a statement-counting test file: a fresh database, a counting store over it and the app on that store
 * (`env` and the clock as startTestApp takes them). `close` stops the app and drops the database.
 */
export async function countingTestApp(
  env: Record<string, string> = {},
  opts: { clock?: Clock } = {},
): Promise<{ db: TestDatabase; counting: CountingStore; t: TestApp; close(): Promise<void> }> {
  const db = await createTestDatabase()
  const counting = countingStore(db.store)
  const t = await startTestApp(env, { db: { ...db, store: counting }, ...(opts.clock ? { clock: opts.clock } : {}) })
  return {
    db,
    counting,
    t,
    async close() {
      await t.close()
      await db.drop()
    },
  }
}
