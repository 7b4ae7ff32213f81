import type { Queryable } from './store.ts'

/**
 * The store as a one-read route's read sees it: one statement, its text fixed (prepared by name). A second
 * statement is a route declared `oneRead` that is not: an error, so that a test finds it. `run` runs the
 * statement with the request's gate in it, where the gate can.
 */
export function oneStatement(
  db: Queryable,
  operationId: string,
  run?: <T extends object>(sql: string, params: readonly unknown[]) => Promise<T[]>,
): Queryable {
  let used = false
  return {
    async query<T extends object>(sql: string, params: readonly unknown[] = []): Promise<T[]> {
      if (used) throw new Error(`${operationId} is declared oneRead but ran a second statement`)
      used = true
      return run ? run<T>(sql, params) : db.query<T>(sql, params, { prepared: true })
    },
    // A read has no use for several unparameterized statements (migrations): refused like a second statement.
    exec: () => Promise.reject(new Error(`${operationId} is declared oneRead but ran exec`)),
  }
}

/** The store as a one-read route's handler sees it: the route's read has run, so any statement is a second one. */
export function noStatement(operationId: string): Queryable {
  const refuse = () => Promise.reject(new Error(`${operationId} is declared oneRead but its handler ran a statement`))
  return { query: refuse, exec: refuse }
}
