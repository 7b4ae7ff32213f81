import { randomBytes } from 'node:crypto'
import { createKeyRing, KEY_BYTES, type KeyRing, keyFromHex, UnreadableSecretError } from '../domain/key-ring.ts'
import type { Queryable, Store } from './store.ts'

/**
 * Where the key ring (src/domain/key-ring.ts) comes from, and the re-encryption of stored secrets under its
 * current key ("rewrap"), for every table that keeps secrets at rest.
 *
 * Keys: WEBHOOK_SECRET_KEY is the current key, WEBHOOK_SECRET_KEY_PREVIOUS (comma-separated) the previous ones.
 * Without WEBHOOK_SECRET_KEY (sandbox only) a key generated once and kept in `settings` is the current key; once
 * WEBHOOK_SECRET_KEY is set, that stored key joins the ring as a previous key by itself, so nothing encrypted
 * under it goes unreadable, and the rewrap moves it all to the configured key.
 */
export interface KeyRingConfig {
  /** WEBHOOK_SECRET_KEY (64 hex digits), or undefined in a sandbox that generates its own. */
  currentHex: string | undefined
  /** WEBHOOK_SECRET_KEY_PREVIOUS, each 64 hex digits. */
  previousHex: readonly string[]
}

const STORED_KEY = 'webhook_secret_key'

export async function loadKeyRing(db: Queryable, c: KeyRingConfig): Promise<KeyRing> {
  const previous = c.previousHex.map(keyFromHex)
  if (c.currentHex) {
    const stored = await db.query<{ value: string }>(`SELECT value FROM settings WHERE key = $1`, [STORED_KEY])
    return createKeyRing(keyFromHex(c.currentHex), [...previous, ...stored.map((r) => keyFromHex(r.value))])
  }
  // Two instances starting at once: one insert wins, both read the same key.
  await db.query(`INSERT INTO settings (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING`, [
    STORED_KEY,
    randomBytes(KEY_BYTES).toString('hex'),
  ])
  const rows = await db.query<{ value: string }>(`SELECT value FROM settings WHERE key = $1`, [STORED_KEY])
  return createKeyRing(keyFromHex((rows[0] as { value: string }).value), previous)
}

/** A lazily loaded ring shared by a process's services (loaded again after a failed load). */
export function keyRingLoader(db: Queryable, c: KeyRingConfig): () => Promise<KeyRing> {
  let ring: Promise<KeyRing> | undefined
  return () => {
    ring ??= loadKeyRing(db, c).catch((err) => {
      ring = undefined
      throw err
    })
    return ring
  }
}

/**
 * A table that keeps secrets encrypted with the ring: its key columns (the keyset the rewrap walks), its
 * ciphertext columns (nullable ones are skipped when null), and the additional data each row's secrets are bound
 * to. A family that stores secrets exports one of these from its store.ts; the app lists them all
 * (src/app.ts `encryptedSecrets`), so the check at start, `/readyz` and `POST /admin/v1/secrets/rewrap` cover it.
 * Table and column names are constants of the code, never input.
 */
export interface EncryptedColumns {
  table: string
  keyColumns: readonly string[]
  ciphertextColumns: readonly string[]
  aad(row: Record<string, string>): string
}

export interface RewrapResult {
  /** Ciphertexts re-encrypted under the current key. */
  rewrapped: number
  /** Ciphertexts no key of the ring opens (left as they are). */
  undecryptable: number
}

const ident = (name: string) => {
  if (!/^[a-z_][a-z0-9_]*$/.test(name)) throw new Error(`not an identifier: ${name}`)
  return name
}

/**
 * Re-encrypts under the current key every ciphertext of one table that is not under it yet. Bounded: chunks of
 * `chunk` rows, one transaction each, walked in key order, so each row is looked at once per run. Safe with
 * several instances at once: a chunk's rows are locked FOR UPDATE SKIP LOCKED (another instance's rows are
 * skipped, that instance rewraps them) and a rewrapped row no longer matches, so running again changes nothing.
 */
export async function rewrapTable(store: Store, ring: KeyRing, t: EncryptedColumns, chunk = 100): Promise<RewrapResult> {
  const keys = t.keyColumns.map(ident)
  const cols = t.ciphertextColumns.map(ident)
  const table = ident(t.table)
  const total: RewrapResult = { rewrapped: 0, undecryptable: 0 }
  // `v2.<current key id>.`: hex digits and dots only, so no LIKE wildcard.
  const current = `v2.${ring.current.id}.%`
  const stale = cols.map((c) => `(${c} IS NOT NULL AND ${c} NOT LIKE $1)`).join(' OR ')
  let after: string[] | null = null
  for (;;) {
    const from: string[] | null = after
    const result = await store.transaction(async (tx) => {
      const params: unknown[] = [current, chunk]
      let keyset = ''
      if (from) {
        keyset = ` AND (${keys.join(', ')}) > (${from.map((_, i) => `$${i + 3}`).join(', ')})`
        params.push(...from)
      }
      const rows = await tx.query<Record<string, string>>(
        `SELECT ${[...keys, ...cols].join(', ')} FROM ${table}
          WHERE (${stale})${keyset}
          ORDER BY ${keys.join(', ')} LIMIT $2
          FOR UPDATE SKIP LOCKED`,
        params,
      )
      let rewrapped = 0
      let undecryptable = 0
      for (const row of rows) {
        const aad = t.aad(row)
        const updates: [string, string][] = []
        for (const c of cols) {
          const stored = row[c]
          if (stored === null || stored === undefined) continue
          try {
            const next = ring.rewrap(aad, stored)
            if (next !== null) updates.push([c, next])
          } catch (err) {
            if (!(err instanceof UnreadableSecretError)) throw err
            // Left as it is: the family's own path says so where it is used (a webhook endpoint is disabled).
            undecryptable++
          }
        }
        if (updates.length > 0) {
          await tx.query(
            `UPDATE ${table} SET ${updates.map(([c], i) => `${c} = $${i + 1}`).join(', ')}
              WHERE ${keys.map((k, i) => `${k} = $${updates.length + i + 1}`).join(' AND ')}`,
            [...updates.map(([, v]) => v), ...keys.map((k) => row[k])],
          )
          rewrapped += updates.length
        }
      }
      const last = rows.at(-1)
      return { rewrapped, undecryptable, next: rows.length === chunk && last ? keys.map((k) => last[k] as string) : null }
    })
    total.rewrapped += result.rewrapped
    total.undecryptable += result.undecryptable
    if (!result.next) return total
    after = result.next
  }
}

/** Every table's ciphertexts under the current key: the operator's route (never a start: docs/operations.md). */
export async function rewrapAll(store: Store, ring: KeyRing, tables: readonly EncryptedColumns[], chunk = 100): Promise<RewrapResult> {
  const total: RewrapResult = { rewrapped: 0, undecryptable: 0 }
  for (const t of tables) {
    const r = await rewrapTable(store, ring, t, chunk)
    total.rewrapped += r.rewrapped
    total.undecryptable += r.undecryptable
  }
  return total
}

/**
 * How many stored ciphertexts no key of `ring` opens, read only (nothing locked, nothing written): what an instance
 * reports in `/readyz` and its start's log line when its key ring lacks a key the store's secrets need (a rotation
 * rolled out in the wrong order, or an instance started with another WEBHOOK_SECRET_KEY). A ciphertext under a
 * key id the ring holds counts as readable; one under another id, or in the format before key ids (`v1.`), is
 * tried with every key. Walked in key order in chunks of `chunk` rows; in the usual case (every ciphertext under a
 * key of the ring) one statement per table that finds nothing.
 */
export async function countUnreadable(db: Queryable, ring: KeyRing, tables: readonly EncryptedColumns[], chunk = 500): Promise<number> {
  const prefixes = ring.keys.map((k) => `v2.${k.id}.`)
  let unreadable = 0
  for (const t of tables) {
    const keys = t.keyColumns.map(ident)
    const cols = t.ciphertextColumns.map(ident)
    // `v2.<key id>.`: hex digits and dots only, so no LIKE wildcard.
    const foreign = cols
      .map((c) => `(${c} IS NOT NULL AND ${prefixes.map((_, i) => `${c} NOT LIKE $${i + 2}`).join(' AND ')})`)
      .join(' OR ')
    let after: string[] | null = null
    for (;;) {
      const params: unknown[] = [chunk, ...prefixes.map((p) => `${p}%`)]
      let keyset = ''
      if (after) {
        keyset = ` AND (${keys.join(', ')}) > (${after.map((_, i) => `$${params.length + i + 1}`).join(', ')})`
        params.push(...after)
      }
      const rows: Record<string, string>[] = await db.query<Record<string, string>>(
        `SELECT ${[...keys, ...cols].join(', ')} FROM ${ident(t.table)}
          WHERE (${foreign})${keyset}
          ORDER BY ${keys.join(', ')} LIMIT $1`,
        params,
      )
      for (const row of rows) {
        for (const c of cols) {
          const stored = row[c]
          if (stored === null || stored === undefined || prefixes.some((p) => stored.startsWith(p))) continue
          try {
            ring.decrypt(t.aad(row), stored)
          } catch (err) {
            if (!(err instanceof UnreadableSecretError)) throw err
            unreadable++
          }
        }
      }
      const last = rows.at(-1)
      if (rows.length < chunk || !last) break
      after = keys.map((k) => last[k] as string)
    }
  }
  return unreadable
}

/** What `/readyz` says of an instance that holds stored secrets it cannot open (docs/operations.md, "/readyz"). */
export interface SecretReadiness {
  code: 'unreadable_secrets'
  count: number
  detail: string
}

/**
 * The instance's own view of the stored secrets: how many of them its key ring cannot open, counted at start
 * (`run`, which logs nothing itself) and again when `/readyz` asks after the count is `maxAgeMs` old (in the
 * background: the probe answers with the last count at once, and never waits on the scan). Another instance's
 * rewrap or a secret it writes under a key this one lacks shows within a minute.
 */
export function createSecretCheck(deps: {
  db: Queryable
  keyRing: () => Promise<KeyRing>
  tables: readonly EncryptedColumns[]
  now: () => number
  maxAgeMs?: number
}) {
  const maxAgeMs = deps.maxAgeMs ?? 60_000
  let last: { count: number; at: number } | null = null
  let running: Promise<number> | null = null
  const run = (): Promise<number> => {
    running ??= (async () => {
      try {
        const count = await countUnreadable(deps.db, await deps.keyRing(), deps.tables)
        last = { count, at: deps.now() }
        return count
      } finally {
        running = null
      }
    })()
    return running
  }
  return {
    run,
    /** The degraded note of `/readyz`, from the last count (undefined when every secret opens or nothing was counted yet). */
    readiness(): SecretReadiness | undefined {
      if (!running && (!last || deps.now() - last.at >= maxAgeMs)) run().catch(() => {})
      if (!last || last.count === 0) return undefined
      return {
        code: 'unreadable_secrets',
        count: last.count,
        detail: `${last.count} stored secret${last.count === 1 ? ' is' : 's are'} encrypted under a key this instance does not hold: add that key to its WEBHOOK_SECRET_KEY_PREVIOUS and restart it (docs/operations.md, "Rotating WEBHOOK_SECRET_KEY").`,
      }
    },
  }
}

export type SecretCheck = ReturnType<typeof createSecretCheck>
