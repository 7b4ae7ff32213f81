import assert from 'node:assert/strict'
import { test } from 'node:test'
import fc from 'fast-check'
import { unacknowledgedMinor } from '../../../src/domain/money-rules.ts'
import { takeBackSplit, undeclaredShareMinor } from '../../../src/resources/payments/take-back.ts'

/**
 * The pure rule of money taken back from a Payment (src/resources/payments/take-back.ts; docs/decisions.md, "Money
 * taken back per Payment"), over generated Payments: the four parts add up to the amount, each within what the
 * Payment holds of its kind, and in order (a later part is used only when the earlier ones are exhausted).
 */
const payment = fc
  .record({
    allocated: fc.bigInt({ min: 0n, max: 100_000n }),
    unapplied: fc.bigInt({ min: 0n, max: 100_000n }),
    takenBackUnappliedShare: fc.double({ min: 0, max: 1, noNaN: true }),
    takenBackAllocatedShare: fc.double({ min: 0, max: 1, noNaN: true }),
    matchedShare: fc.double({ min: 0, max: 1, noNaN: true }),
    undeclaredShare: fc.double({ min: 0, max: 1, noNaN: true }),
    amountShare: fc.double({ min: 0, max: 1, noNaN: true }),
  })
  .map((g) => {
    const part = (of: bigint, share: number) => BigInt(Math.floor(Number(of) * share))
    const takenBackUnapplied = part(g.unapplied, g.takenBackUnappliedShare)
    const takenBackAllocated = part(g.allocated, g.takenBackAllocatedShare)
    // Matched never exceeds what was acknowledgeable; acknowledged money held is what is left of it after take-back.
    const matched = part(g.allocated, g.matchedShare)
    const acknowledgedHeld =
      g.allocated -
      takenBackAllocated -
      unacknowledgedMinor({ allocatedMinor: g.allocated, takenBackAllocatedMinor: takenBackAllocated, matchedMinor: matched })
    const undeclared = part(acknowledgedHeld, g.undeclaredShare)
    const remaining = g.unapplied - takenBackUnapplied + g.allocated - takenBackAllocated
    return {
      p: {
        unappliedMinor: g.unapplied,
        allocatedMinor: g.allocated,
        takenBackUnappliedMinor: takenBackUnapplied,
        takenBackAllocatedMinor: takenBackAllocated,
        matchedMinor: matched,
        acknowledgedUndeclaredMinor: undeclared,
      },
      amount: part(remaining, g.amountShare),
    }
  })

test('the parts add up to the amount, each within its kind, in order: unapplied, unacknowledged, undeclared, declared', () => {
  fc.assert(
    fc.property(payment, ({ p, amount }) => {
      const s = takeBackSplit(amount, p)
      const unapplied = p.unappliedMinor - p.takenBackUnappliedMinor
      const unacknowledged = unacknowledgedMinor(p)
      assert.equal(s.unappliedMinor + s.unacknowledgedMinor + s.acknowledgedUndeclaredMinor + s.acknowledgedDeclaredMinor, amount)
      for (const part of Object.values(s)) assert.ok(part >= 0n)
      assert.ok(s.unappliedMinor <= unapplied)
      assert.ok(s.unacknowledgedMinor <= unacknowledged)
      assert.ok(s.acknowledgedUndeclaredMinor <= p.acknowledgedUndeclaredMinor)
      // Declared money is what remains of the Payment's held acknowledged money beyond its undeclared share.
      const acknowledgedHeld = p.allocatedMinor - p.takenBackAllocatedMinor - unacknowledged
      assert.ok(s.acknowledgedDeclaredMinor <= acknowledgedHeld - p.acknowledgedUndeclaredMinor)
      if (s.unacknowledgedMinor > 0n) assert.equal(s.unappliedMinor, unapplied)
      if (s.acknowledgedUndeclaredMinor > 0n) assert.equal(s.unacknowledgedMinor, unacknowledged)
      if (s.acknowledgedDeclaredMinor > 0n) assert.equal(s.acknowledgedUndeclaredMinor, p.acknowledgedUndeclaredMinor)
    }),
    { numRuns: 2000 },
  )
})

test('the shrunk case: the first Payment has no undeclared share, so its acknowledged 0.01 is declared money', () => {
  const first = {
    unappliedMinor: 0n,
    allocatedMinor: 5_000n,
    takenBackUnappliedMinor: 0n,
    takenBackAllocatedMinor: 0n,
    matchedMinor: 1n,
    acknowledgedUndeclaredMinor: 0n,
  }
  assert.deepEqual(takeBackSplit(5_000n, first), {
    unappliedMinor: 0n,
    unacknowledgedMinor: 4_999n,
    acknowledgedUndeclaredMinor: 0n,
    acknowledgedDeclaredMinor: 1n,
  })
})

test('a share counts only at the count of declarations it was written at', () => {
  const share = { acknowledged_undeclared_minor: '250', undeclared_as_of: '3' }
  assert.equal(undeclaredShareMinor(share, 3n), 250n)
  assert.equal(undeclaredShareMinor(share, 4n), 0n)
})

test('unacknowledged money: the allocation net of money taken back, less what was matched, never below zero', () => {
  assert.equal(unacknowledgedMinor({ allocatedMinor: 6_000n, takenBackAllocatedMinor: 3_000n, matchedMinor: 2_000n }), 1_000n)
  assert.equal(unacknowledgedMinor({ allocatedMinor: 6_000n, takenBackAllocatedMinor: 2_500n, matchedMinor: 4_500n }), 0n)
  assert.equal(unacknowledgedMinor({ allocatedMinor: 6_000n, takenBackAllocatedMinor: 0n, matchedMinor: 0n }), 6_000n)
})
