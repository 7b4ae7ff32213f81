import type { Tx } from './store.ts'

/**
 * How the client-keyed tables are laid out (DATABASE_LAYOUT, docs/scaling.md).
 *
 * - `plain`: one table each (production on one PostgreSQL, the embedded store).
 * - `partitioned`: every table with a `client_code` column is hash-partitioned by it into PARTITIONS partitions.
 *   It is the stand-in for Citus on one PostgreSQL: a partitioned table refuses a unique key without its
 *   partition key (Citus refuses one without its distribution column), and a statement that names one client is
 *   planned against one partition (Citus routes it to one node). test/store/statement-audit.test.ts checks the
 *   second with EXPLAIN.
 *
 * The numbered migrations are written once, for the plain layout; `partitionClientTables` converts after them
 * (docs/decisions.md, "The partitioned layout"): each client-keyed table not partitioned yet is recreated as a
 * partitioned table with the same columns, defaults, checks, keys, indexes and foreign keys (names kept, so the
 * schema dump reads the same) and its rows copied over. A migration added later that creates a client-keyed
 * table is converted at the next run the same way.
 */
export type DatabaseLayout = 'plain' | 'partitioned'

export const PARTITIONS = 8

/**
 * Tables that carry a client code but are keyed by something else: they find the client of a value that arrives
 * without one (page_tokens: the hosted page's token). Not client-keyed; on Citus each is distributed by its own key
 * (docs/scaling.md).
 */
export const LOOKUP_TABLES: readonly string[] = ['page_tokens']

const ident = (name: string) => {
  if (!/^[a-z_][a-z0-9_]*$/.test(name)) throw new Error(`not an identifier: ${name}`)
  return name
}

/** Tables of `public` with a `client_code` column but LOOKUP_TABLES: ordinary (not partitioned yet) or partitioned, not partitions. */
export async function clientKeyedTables(tx: Pick<Tx, 'query'>): Promise<{ name: string; partitioned: boolean }[]> {
  return tx.query<{ name: string; partitioned: boolean }>(
    `SELECT c.relname AS name, c.relkind = 'p' AS partitioned
       FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND NOT c.relispartition AND c.relname <> ALL($1::text[])
        AND EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'client_code' AND NOT a.attisdropped)
      ORDER BY c.relname COLLATE "C"`,
    [LOOKUP_TABLES],
  )
}

/**
 * Converts every client-keyed table that is still an ordinary table into one hash-partitioned by `client_code`.
 * Runs inside the migration's transaction; views are dropped first (they are re-created from the definition
 * files right after). Returns the tables converted.
 */
export async function partitionClientTables(tx: Tx): Promise<string[]> {
  const todo = (await clientKeyedTables(tx)).filter((t) => !t.partitioned).map((t) => ident(t.name))
  if (todo.length === 0) return []
  const views = await tx.query<{ name: string }>(
    `SELECT c.relname AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = 'public' AND c.relkind = 'v'`,
  )
  for (const v of views) await tx.exec(`DROP VIEW IF EXISTS ${ident(v.name)} CASCADE`)
  // Every foreign key from or to a table converted: dropped first, added back (same name, same definition) last.
  const foreignKeys = await tx.query<{ table_name: string; name: string; definition: string }>(
    `SELECT t.relname AS table_name, k.conname AS name, pg_get_constraintdef(k.oid) AS definition
       FROM pg_constraint k JOIN pg_class t ON t.oid = k.conrelid JOIN pg_class r ON r.oid = k.confrelid
      WHERE k.contype = 'f' AND k.conparentid = 0 AND (t.relname = ANY($1::text[]) OR r.relname = ANY($1::text[]))
      ORDER BY k.oid`,
    [todo],
  )
  for (const k of foreignKeys) await tx.exec(`ALTER TABLE ${ident(k.table_name)} DROP CONSTRAINT ${ident(k.name)}`)
  for (const table of todo) await convert(tx, table)
  for (const k of foreignKeys) await tx.exec(`ALTER TABLE ${ident(k.table_name)} ADD CONSTRAINT ${ident(k.name)} ${k.definition}`)
  return todo
}

async function convert(tx: Tx, table: string): Promise<void> {
  const keys = await tx.query<{ name: string; definition: string }>(
    `SELECT k.conname AS name, pg_get_constraintdef(k.oid) AS definition FROM pg_constraint k
      WHERE k.conrelid = $1::regclass AND k.contype IN ('p', 'u', 'x') ORDER BY k.oid`,
    [table],
  )
  const indexes = await tx.query<{ definition: string }>(
    `SELECT pg_get_indexdef(i.indexrelid) AS definition FROM pg_index i
      WHERE i.indrelid = $1::regclass AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid)
      ORDER BY i.indexrelid`,
    [table],
  )
  const sequences = await tx.query<{ sequence: string; column_name: string }>(
    `SELECT s.relname AS sequence, a.attname AS column_name FROM pg_depend d
       JOIN pg_class s ON s.oid = d.objid AND s.relkind = 'S'
       JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
      WHERE d.refobjid = $1::regclass AND d.deptype = 'a' AND d.classid = 'pg_class'::regclass`,
    [table],
  )
  // Columns left out of ANALYZE (migration 0053): `LIKE` does not copy a column's statistics target.
  const unsampled = await tx.query<{ attname: string }>(
    'SELECT attname FROM pg_attribute WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped AND attstattarget = 0',
    [table],
  )
  const old = `${table}_unpartitioned`
  for (const s of sequences) await tx.exec(`ALTER SEQUENCE ${ident(s.sequence)} OWNED BY NONE`)
  await tx.exec(`ALTER TABLE ${table} RENAME TO ${old}`)
  // Checks are copied under their names; keys and indexes are created below, under their names too.
  await tx.exec(
    `CREATE TABLE ${table} (LIKE ${old} INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING GENERATED INCLUDING IDENTITY INCLUDING STORAGE INCLUDING COMMENTS)
       PARTITION BY HASH (client_code)`,
  )
  for (let i = 0; i < PARTITIONS; i++)
    await tx.exec(`CREATE TABLE ${table}_p${i} PARTITION OF ${table} FOR VALUES WITH (MODULUS ${PARTITIONS}, REMAINDER ${i})`)
  await tx.exec(`INSERT INTO ${table} SELECT * FROM ${old}`)
  await tx.exec(`DROP TABLE ${old}`)
  for (const k of keys) await tx.exec(`ALTER TABLE ${table} ADD CONSTRAINT ${ident(k.name)} ${k.definition}`)
  for (const i of indexes) await tx.exec(i.definition)
  for (const s of sequences) await tx.exec(`ALTER SEQUENCE ${ident(s.sequence)} OWNED BY ${table}.${ident(s.column_name)}`)
  // On the partitioned table, so every partition has it too.
  for (const c of unsampled) await tx.exec(`ALTER TABLE ${table} ALTER COLUMN ${ident(c.attname)} SET STATISTICS 0`)
}
