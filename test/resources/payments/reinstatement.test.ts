import assert from 'node:assert/strict'
import { test } from 'node:test'
import fc from 'fast-check'
import { unacknowledgedMinor } from '../../../src/domain/money-rules.ts'
import { reinstatementSplit } from '../../../src/resources/payments/reinstatement.ts'
import { takeBackSplit } from '../../../src/resources/payments/take-back.ts'

/**
 * The pure rule of money a won dispute gives back to a Payment (src/resources/payments/reinstatement.ts; docs/decisions.md,
 * "A won dispute reinstates"): exact cases, and over generated Payments the parts add up to the amount, allocated money
 * goes back before unapplied money, never more than the working amount is owed again, and giving back what a
 * take-back took (with room) restores the Payment's unacknowledged money exactly.
 */
const split = (amount: bigint, p: Partial<Parameters<typeof reinstatementSplit>[1]>) =>
  reinstatementSplit(amount, {
    allocatedMinor: 0n,
    takenBackUnappliedMinor: 0n,
    takenBackAllocatedMinor: 0n,
    matchedMinor: 0n,
    workingMinor: 0n,
    ...p,
  })

test('exact cases: owed again, acknowledged, beyond the working amount, unapplied', () => {
  // 30.00 allocated, all taken back by the dispute, room on the Receivable: owed again in full.
  assert.deepEqual(split(3000n, { allocatedMinor: 3000n, takenBackAllocatedMinor: 3000n, workingMinor: 10_000n }), {
    unappliedMinor: 0n,
    allocatedMinor: 3000n,
    unacknowledgedMinor: 3000n,
    acknowledgedMinor: 0n,
    overflowMinor: 0n,
  })
  // 10.00 of it acknowledged by a receipt line: back to the undeclared share, the rest owed again.
  assert.deepEqual(split(3000n, { allocatedMinor: 3000n, takenBackAllocatedMinor: 3000n, matchedMinor: 1000n, workingMinor: 10_000n }), {
    unappliedMinor: 0n,
    allocatedMinor: 3000n,
    unacknowledgedMinor: 2000n,
    acknowledgedMinor: 1000n,
    overflowMinor: 0n,
  })
  // The debtor paid again meanwhile: 5.00 of room left, 25.00 can no longer be owed.
  assert.deepEqual(split(3000n, { allocatedMinor: 3000n, takenBackAllocatedMinor: 3000n, workingMinor: 500n }), {
    unappliedMinor: 0n,
    allocatedMinor: 3000n,
    unacknowledgedMinor: 500n,
    acknowledgedMinor: 0n,
    overflowMinor: 2500n,
  })
  // The dispute took 5.00 of unapplied money (not yet refunded) and 20.00 allocated: allocated comes back first.
  assert.deepEqual(
    split(2500n, { allocatedMinor: 2000n, takenBackAllocatedMinor: 2000n, takenBackUnappliedMinor: 500n, workingMinor: 0n }),
    { unappliedMinor: 500n, allocatedMinor: 2000n, unacknowledgedMinor: 0n, acknowledgedMinor: 0n, overflowMinor: 2000n },
  )
  // Nothing back: nothing moves.
  assert.deepEqual(split(0n, { allocatedMinor: 3000n, takenBackAllocatedMinor: 3000n, workingMinor: 10_000n }), {
    unappliedMinor: 0n,
    allocatedMinor: 0n,
    unacknowledgedMinor: 0n,
    acknowledgedMinor: 0n,
    overflowMinor: 0n,
  })
})

const generated = fc
  .record({
    allocated: fc.bigInt({ min: 0n, max: 100_000n }),
    unapplied: fc.bigInt({ min: 0n, max: 100_000n }),
    matchedShare: fc.double({ min: 0, max: 1, noNaN: true }),
    amountShare: fc.double({ min: 0, max: 1, noNaN: true }),
    working: fc.bigInt({ min: 0n, max: 200_000n }),
  })
  .map((g) => {
    const matched = BigInt(Math.floor(Number(g.allocated) * g.matchedShare))
    const amount = BigInt(Math.floor(Number(g.allocated + g.unapplied) * g.amountShare))
    return { ...g, matched, amount }
  })

test('what a take-back took comes back: the parts add up, allocated first, never above the working amount', () => {
  fc.assert(
    fc.property(generated, ({ allocated, unapplied, matched, amount, working }) => {
      // A reversal of `amount` from a Payment with nothing taken back yet (the take-back rule), then given back.
      const taken = takeBackSplit(amount, {
        unappliedMinor: unapplied,
        allocatedMinor: allocated,
        takenBackUnappliedMinor: 0n,
        takenBackAllocatedMinor: 0n,
        matchedMinor: matched,
        acknowledgedUndeclaredMinor: 0n,
      })
      const takenAllocated = amount - taken.unappliedMinor
      const back = reinstatementSplit(amount, {
        allocatedMinor: allocated,
        takenBackUnappliedMinor: taken.unappliedMinor,
        takenBackAllocatedMinor: takenAllocated,
        matchedMinor: matched,
        workingMinor: working,
      })
      assert.equal(back.unappliedMinor + back.allocatedMinor, amount)
      assert.equal(back.allocatedMinor, takenAllocated)
      assert.equal(back.unappliedMinor, taken.unappliedMinor)
      assert.equal(back.unacknowledgedMinor + back.acknowledgedMinor + back.overflowMinor, back.allocatedMinor)
      assert.ok(back.unacknowledgedMinor <= working)
      // With room, the unacknowledged money the take-back released is owed again exactly, and nothing overflows.
      if (working >= taken.unacknowledgedMinor) {
        assert.equal(back.unacknowledgedMinor, taken.unacknowledgedMinor)
        assert.equal(back.overflowMinor, 0n)
      } else {
        assert.equal(back.unacknowledgedMinor, working)
      }
      assert.equal(
        back.unacknowledgedMinor + back.overflowMinor,
        unacknowledgedMinor({ allocatedMinor: allocated, takenBackAllocatedMinor: 0n, matchedMinor: matched }) -
          unacknowledgedMinor({ allocatedMinor: allocated, takenBackAllocatedMinor: takenAllocated, matchedMinor: matched }),
      )
    }),
  )
})
