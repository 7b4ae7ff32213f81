import assert from 'node:assert/strict'
import { createCipheriv, randomBytes } from 'node:crypto'
import { test } from 'node:test'
import fc from 'fast-check'
import { createKeyRing, keyId, UnreadableSecretError } from '../../src/domain/key-ring.ts'

/**
 * The key ring (src/domain/key-ring.ts) as properties: a ciphertext made with any ring opens with every ring that
 * holds its key, current or previous, and with no ring that does not; it is bound to its additional data; the
 * format before the ring (`v1.`, no key id) opens by trying every key.
 */

const key = fc.uint8Array({ minLength: 32, maxLength: 32 }).map((a) => Buffer.from(a))
/** Distinct keys (a 256-bit collision never happens; two equal arbitraries could). */
const keys = (min: number, max: number) => fc.uniqueArray(key, { minLength: min, maxLength: max, selector: (k) => k.toString('hex') })
const aad = fc.string({ maxLength: 60 })
const plaintext = fc.string({ maxLength: 80 })

/** The format every stored secret had before the ring: `v1.<iv>.<tag>.<ciphertext>` under one key. */
function legacyEncrypt(k: Buffer, secret: string, ad: string): string {
  const iv = randomBytes(12)
  const cipher = createCipheriv('aes-256-gcm', k, iv)
  cipher.setAAD(Buffer.from(ad))
  const ct = Buffer.concat([cipher.update(secret, 'utf8'), cipher.final()])
  return `v1.${iv.toString('base64url')}.${cipher.getAuthTag().toString('base64url')}.${ct.toString('base64url')}`
}

const unreadable = (fn: () => unknown) => assert.throws(fn, (err) => err instanceof UnreadableSecretError && err.reason === 'no_key')

test('a ciphertext opens with every ring holding its key (current or previous, anywhere in the list), with no other', () => {
  fc.assert(
    fc.property(keys(3, 6), fc.nat(), fc.nat(), aad, plaintext, (ks, a, b, ad, text) => {
      // The writer's current key is ks[0]; the reader holds it at position b among other keys, or not at all.
      const writer = createKeyRing(ks[0] as Buffer, ks.slice(1, 1 + (a % (ks.length - 1))))
      const stored = writer.encrypt(ad, text)
      assert.ok(stored.startsWith(`v2.${keyId(ks[0] as Buffer)}.`))
      const others = ks.slice(1)
      const at = b % (others.length + 1)
      const holder = [...others.slice(0, at), ks[0] as Buffer, ...others.slice(at)]
      const reader = createKeyRing(holder[0] as Buffer, holder.slice(1))
      assert.equal(reader.decrypt(ad, stored), text)
      assert.equal(reader.needsRewrap(stored), at !== 0)
      // A ring without the key: refused, whichever keys it has.
      unreadable(() => createKeyRing(others[0] as Buffer, others.slice(1)).decrypt(ad, stored))
    }),
  )
})

test('additional data binds a ciphertext: other additional data never opens it', () => {
  fc.assert(
    fc.property(keys(1, 3), aad, aad, plaintext, (ks, ad, other, text) => {
      fc.pre(ad !== other)
      const ring = createKeyRing(ks[0] as Buffer, ks.slice(1))
      unreadable(() => ring.decrypt(other, ring.encrypt(ad, text)))
      unreadable(() => ring.decrypt(other, legacyEncrypt(ks.at(-1) as Buffer, text, ad)))
    }),
  )
})

test('the v1 format opens with any ring holding its key; it always needs a rewrap, and rewrap moves it under the current key', () => {
  fc.assert(
    fc.property(keys(2, 5), fc.nat(), aad, plaintext, (ks, i, ad, text) => {
      const k = ks[i % ks.length] as Buffer
      const stored = legacyEncrypt(k, text, ad)
      const ring = createKeyRing(ks[0] as Buffer, ks.slice(1))
      assert.equal(ring.decrypt(ad, stored), text)
      assert.equal(ring.needsRewrap(stored), true)
      const moved = ring.rewrap(ad, stored) as string
      assert.ok(moved.startsWith(`v2.${ring.current.id}.`))
      assert.equal(ring.needsRewrap(moved), false)
      assert.equal(ring.rewrap(ad, moved), null)
      // Under the current key alone now: a ring of only that key opens it.
      assert.equal(createKeyRing(ks[0] as Buffer).decrypt(ad, moved), text)
      unreadable(() => createKeyRing(ks[1] as Buffer, ks.slice(2)).decrypt(ad, moved))
    }),
  )
})

test('a damaged or foreign value is unreadable, never a crash or a wrong plaintext', () => {
  const ring = createKeyRing(randomBytes(32))
  const stored = ring.encrypt('a', 'whsec_x')
  const parts = stored.split('.')
  const flipped = [...parts.slice(0, 4), `${(parts[4] as string).startsWith('A') ? 'B' : 'A'}${(parts[4] as string).slice(1)}`].join('.')
  unreadable(() => ring.decrypt('a', flipped))
  unreadable(() => ring.decrypt('a', stored.replace(ring.current.id, '0123456789abcdef')))
  for (const v of ['', 'whsec_plain', 'v3.a.b.c.d', 'v2.only.three', 'v1.a.b']) {
    assert.throws(
      () => ring.decrypt('a', v),
      (err) => err instanceof UnreadableSecretError && err.reason === 'unknown_format',
    )
  }
})

test('the key id names a key without revealing it: 16 hex digits, the same for the same key', () => {
  const k = Buffer.from('ab'.repeat(32), 'hex')
  assert.equal(keyId(k), keyId(Buffer.from(k)))
  assert.match(keyId(k), /^[0-9a-f]{16}$/)
  assert.notEqual(keyId(k), keyId(Buffer.from('cd'.repeat(32), 'hex')))
  assert.ok(!k.toString('hex').includes(keyId(k)))
  // The same key twice in a ring counts once; the current key is first.
  const ring = createKeyRing(k, [Buffer.from('cd'.repeat(32), 'hex'), k])
  assert.deepEqual(
    ring.keys.map((x) => x.id),
    [keyId(k), keyId(Buffer.from('cd'.repeat(32), 'hex'))],
  )
})
