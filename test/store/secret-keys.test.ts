import assert from 'node:assert/strict'
import { createCipheriv, randomBytes } from 'node:crypto'
import { after, before, describe, test } from 'node:test'
import { createKeyRing } from '../../src/domain/key-ring.ts'
import { type EncryptedColumns, loadKeyRing, rewrapTable } from '../../src/store/secret-keys.ts'
import type { Store } from '../../src/store/store.ts'
import { createTestDatabase, engineName, onPostgres, type TestDatabase } from '../helpers/store.ts'

/**
 * The rewrap (src/store/secret-keys.ts) on a table of its own: every ciphertext not under the current key moves
 * under it, exactly once even with two instances at once (PostgreSQL: two connections), in chunks walked by a
 * two-column key; what no key opens is counted and left alone; a second run changes nothing.
 */
const K1 = Buffer.alloc(32, 1)
const K2 = Buffer.alloc(32, 2)
const LOST = Buffer.alloc(32, 9)
const ROWS = 240

let db: TestDatabase
const probe: EncryptedColumns = {
  table: 'rewrap_probe',
  keyColumns: ['owner', 'n'],
  ciphertextColumns: ['secret', 'extra'],
  aad: (row) => `probe/${row.owner}/${row.n}`,
}

function legacyEncrypt(k: Buffer, secret: string, aad: string): string {
  const iv = randomBytes(12)
  const cipher = createCipheriv('aes-256-gcm', k, iv)
  cipher.setAAD(Buffer.from(aad))
  const ct = Buffer.concat([cipher.update(secret, 'utf8'), cipher.final()])
  return `v1.${iv.toString('base64url')}.${cipher.getAuthTag().toString('base64url')}.${ct.toString('base64url')}`
}

/** Row i: owner o<i % 3>, n = i; secret under K1 (v1 for even i, v2 for odd), under a lost key for every 40th. */
const plain = (i: number) => `whsec_${i}`
let expectedMoves = 0
before(async () => {
  db = await createTestDatabase()
  await db.store.query('CREATE TABLE rewrap_probe (owner text, n integer, secret text NOT NULL, extra text, PRIMARY KEY (owner, n))')
  const old = createKeyRing(K1)
  const lost = createKeyRing(LOST)
  const values: unknown[] = []
  for (let i = 0; i < ROWS; i++) {
    const aad = `probe/o${i % 3}/${i}`
    const secret = i % 40 === 0 ? lost.encrypt(aad, plain(i)) : i % 2 === 0 ? legacyEncrypt(K1, plain(i), aad) : old.encrypt(aad, plain(i))
    const extra = i % 5 === 0 ? old.encrypt(aad, `extra_${i}`) : null
    if (i % 40 !== 0) expectedMoves++
    if (extra) expectedMoves++
    values.push(`o${i % 3}`, i, secret, extra)
  }
  const tuples = Array.from({ length: ROWS }, (_, r) => `($${r * 4 + 1}, $${r * 4 + 2}, $${r * 4 + 3}, $${r * 4 + 4})`)
  await db.store.query(`INSERT INTO rewrap_probe (owner, n, secret, extra) VALUES ${tuples.join(', ')}`, values)
})
after(() => db.drop())

describe(`rewrap (${engineName})`, () => {
  test('two instances at once: every readable ciphertext moves under the current key exactly once; the lost ones are left', async () => {
    const ring = createKeyRing(K2, [K1])
    const other: Store = onPostgres ? db.open() : db.store
    const [a, b] = await Promise.all([rewrapTable(db.store, ring, probe, 16), rewrapTable(other, ring, probe, 16)])
    assert.equal((a?.rewrapped ?? 0) + (b?.rewrapped ?? 0), expectedMoves)
    const rows = await db.store.query<{ owner: string; n: number; secret: string; extra: string | null }>(
      'SELECT owner, n, secret, extra FROM rewrap_probe ORDER BY n',
    )
    const current = createKeyRing(K2)
    for (const r of rows) {
      const aad = `probe/${r.owner}/${r.n}`
      if (r.n % 40 === 0) {
        assert.ok(r.secret.startsWith(`v2.${createKeyRing(LOST).current.id}.`))
        continue
      }
      assert.equal(current.decrypt(aad, r.secret), plain(r.n))
      if (r.extra !== null) assert.equal(current.decrypt(aad, r.extra), `extra_${r.n}`)
    }
    // Idempotent: nothing left to move; the lost ones are counted each time.
    assert.deepEqual(await rewrapTable(db.store, ring, probe, 16), { rewrapped: 0, undecryptable: ROWS / 40 })
  })

  test('the ring: WEBHOOK_SECRET_KEY current, the previous keys next, and the key a sandbox stored joins by itself', async () => {
    const sandbox = await loadKeyRing(db.store, { currentHex: undefined, previousHex: [K1.toString('hex')] })
    const configured = await loadKeyRing(db.store, { currentHex: K2.toString('hex'), previousHex: [K1.toString('hex')] })
    assert.deepEqual(
      configured.keys.map((k) => k.id),
      [createKeyRing(K2).current.id, createKeyRing(K1).current.id, sandbox.current.id],
    )
    assert.deepEqual(
      sandbox.keys.map((k) => k.id),
      [sandbox.current.id, createKeyRing(K1).current.id],
    )
  })
})
