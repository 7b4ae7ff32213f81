import { PGlite, parse, protocol, types } from '@electric-sql/pglite'
import { embeddedLeaseHolder } from './lease-holder.ts'
import { type AheadOfBegin, normalizeRow, type QueryOptions, type Row, type Store, type Tx } from './store.ts'

const { serialize } = protocol

/** Several protocol messages as one buffer: the backend runs them in one call into it. */
function concat(parts: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0))
  let at = 0
  for (const p of parts) {
    out.set(p, at)
    at += p.length
  }
  return out
}

/** The embedded store, which can also be written out whole as its data directory's tarball. */
export interface EmbeddedStore extends Store {
  /** The data directory as an uncompressed tarball, which `openPglite(undefined, { loadDataDir })` starts from. */
  dumpDataDir(): Promise<Blob>
}

export interface EmbeddedOptions {
  /**
   * An in-memory store starts from this tarball (`dumpDataDir`) instead of an empty cluster of its own: no initdb
   * (about 4 s of CPU on this machine, and a migrated copy saves the migrations' 4 more). The test suite's template
   * (test/helpers/store.ts); the service never passes it.
   */
  loadDataDir?: Blob
}

/**
 * The embedded engine. PGlite is one Postgres backend in-process: it runs one query at a time and a
 * transaction excludes every other query until it ends, so requests on this store are serialized.
 * `dataDir` undefined means in-memory (tests).
 */
export async function openPglite(dataDir?: string, opts: EmbeddedOptions = {}): Promise<EmbeddedStore> {
  if (dataDir && opts.loadDataDir) throw new TypeError('loadDataDir is for an in-memory store only')
  const db = await PGlite.create({
    ...(dataDir ? { dataDir } : {}),
    ...(opts.loadDataDir ? { loadDataDir: opts.loadDataDir } : {}),
    // int8 as text so money in minor units and sequence numbers stay exact.
    parsers: { [types.INT8]: (v: string) => v },
  })
  const run = async <T extends object>(q: Pick<PGlite, 'query'>, sql: string, params?: readonly unknown[]) => {
    const res = await q.query<Row>(sql, params as unknown[] | undefined)
    return res.rows.map((r) => normalizeRow<T>(r))
  }

  /**
   * Prepared statements (`QueryOptions.prepared`), as on PostgreSQL: a named statement parsed once on the one
   * backend, then bound and executed with no parsing or planning of its own after the plan cache settles. PGlite's
   * `query` parses and plans every call (its unnamed statement) in six calls into the backend; this is one call
   * (Bind, Describe, Execute, Sync), with the parameters serialized and the rows parsed as `query` does. Measured:
   * the Receivable read through the holds view spends 1.0 of its 1.4 ms planning (docs/performance.md). A named
   * statement outlives a rolled-back transaction (the protocol's statements are not transactional), and the
   * backend is this process's for its whole life, so a statement is prepared once per store. DDL runs through
   * `exec` (migrations), which forgets them all, so no statement outlives a change of what it reads.
   */
  const statements = new Map<string, { name: string; paramTypes: number[] }>()
  let named = 0
  const forgetStatements = async (q: Pick<PGlite, 'exec'>) => {
    if (statements.size === 0) return
    statements.clear()
    await q.exec('DEALLOCATE ALL')
  }
  const check = (messages: readonly { name: string }[], sql: string) => {
    const error = messages.find((m) => m.name === 'error')
    if (error) throw Object.assign(error, { query: sql })
  }
  /** Runs under the caller's exclusion: the query lock inside a transaction, both locks outside one. */
  const runNamed = async <T extends object>(sql: string, params: readonly unknown[] | undefined, inTransaction: boolean) => {
    let statement = statements.get(sql)
    if (!statement) {
      const name = `irs_${++named}`
      const messages = await db.execProtocolStream(
        concat([serialize.parse({ name, text: sql }), serialize.describe({ type: 'S', name }), serialize.sync()]),
        { syncToFs: false, throwOnError: false },
      )
      check(messages, sql)
      statement = { name, paramTypes: parse.parseDescribeStatementResults(messages) }
      statements.set(sql, statement)
    }
    const { paramTypes } = statement
    const values = (params ?? []).map((v, i) => {
      if (v === null || v === undefined) return null
      const serializer = db.serializers[paramTypes[i] as number]
      return serializer ? serializer(v) : String(v)
    })
    const messages = await db.execProtocolStream(
      concat([
        serialize.bind({ statement: statement.name, values }),
        serialize.describe({ type: 'P' }),
        serialize.execute({}),
        serialize.sync(),
      ]),
      { syncToFs: false, throwOnError: false },
    )
    check(messages, sql)
    if (!inTransaction) await db.syncToFs()
    const [result] = parse.parseResults(messages, db.parsers)
    return (result?.rows ?? []).map((r) => normalizeRow<T>(r as Row))
  }
  /**
   * Outside a transaction a prepared statement takes the two locks PGlite's own `query` takes: the transaction
   * lock (`_runExclusiveTransaction`: public in PGlite's declarations, underscored all the same, so an upgrade that
   * renames it fails test/store/prepared-statements.test.ts at once) and the query lock (`runExclusive`).
   */
  const query = <T extends object>(sql: string, params: readonly unknown[] | undefined, options: QueryOptions | undefined) =>
    options?.prepared ? db._runExclusiveTransaction(() => db.runExclusive(() => runNamed<T>(sql, params, false))) : run<T>(db, sql, params)

  /**
   * Calls on the store not yet finished (a statement, or a whole transaction): the first holds the one
   * backend, the rest wait behind it (PGlite queues them itself). Statements inside a transaction run on its
   * connection and are not counted again. Only for `poolStats`.
   */
  let inFlight = 0
  const counted = async <T>(work: () => Promise<T>): Promise<T> => {
    inFlight++
    try {
      return await work()
    } finally {
      inFlight--
    }
  }
  // Held by the one backend for the life of the process: a lease naming another key was left by a dead process.
  const leaseHolder = await embeddedLeaseHolder((sql, params) => db.query(sql, params))
  return {
    kind: 'pglite',
    leaseHolder,
    query: (sql, params, options) => counted(() => query(sql, params, options)),
    exec: (sql) =>
      counted(async () => {
        await db.exec(sql)
        await forgetStatements(db)
      }),
    poolStats: () => ({ max: 1, total: 1, idle: inFlight === 0 ? 1 : 0, waiting: Math.max(0, inFlight - 1) }),
    async transaction<T>(fn: (tx: Tx) => Promise<T>, ahead?: AheadOfBegin): Promise<T> {
      // In this thread there is no round trip to share: the statement ahead runs before BEGIN, and then the transaction.
      if (ahead)
        await ahead({
          query: (sql, params, options) => counted(() => query(sql, params, options)),
          exec: (sql) => db.exec(sql).then(() => {}),
        })
      return counted(() =>
        db.transaction(async (t) => {
          // PGlite refuses a statement on a transaction that has ended (`t.closed`); so does the prepared path, which
          // does not go through `t`: run after the end, it would run outside any transaction.
          const open = () => {
            if (t.closed) throw new Error('Transaction is closed')
          }
          return fn({
            query: async (sql, params, options) => {
              if (!options?.prepared) return run(t, sql, params)
              open()
              return db.runExclusive(() => runNamed(sql, params, true))
            },
            exec: async (sql) => {
              await t.exec(sql)
              await forgetStatements(t)
            },
            serialized: true,
          })
        }),
      )
    },
    close: () => db.close(),
    dumpDataDir: () => db.dumpDataDir('none'),
  }
}
