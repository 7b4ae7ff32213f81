import assert from 'node:assert/strict'
import { test } from 'node:test'
import fc from 'fast-check'
import type { ChangeInput } from '../../src/resources/feed/store.ts'
import { UnitOfWork } from '../../src/resources/unit-of-work.ts'
import type { Tx } from '../../src/store/store.ts'

/** UnitOfWork.orderEventsSince: a batch chunk's events in array order, never two events of one resource swapped. */
const change = (id: string, revision: number): ChangeInput => ({
  type: 'receivable.updated',
  resourceType: 'receivable',
  resourceId: id,
  revision,
  occurredAt: '2026-11-24T00:00:00.000Z',
})
const noTx = {} as Tx

function ordered(events: { id: string; order: number }[], before = 0) {
  const uow = new UnitOfWork(noTx)
  const revisions = new Map<string, number>()
  const orders = new Map<ChangeInput, number>()
  for (let i = 0; i < before; i++) uow.appendChange('c', change(`early-${i}`, 1))
  const mark = uow.mark()
  for (const e of events) {
    const revision = (revisions.get(e.id) ?? 0) + 1
    revisions.set(e.id, revision)
    const c = change(e.id, revision)
    orders.set(c, e.order)
    uow.appendChange('c', c)
  }
  uow.orderEventsSince(mark, (c) => orders.get(c) as number)
  return { all: uow.eventsSince({ events: new Map(), touches: new Map(), watched: new Map() }).map(([, c]) => c), orders }
}

test('events before the mark stay first; events of distinct resources follow their orders', () => {
  const { all } = ordered(
    [
      { id: 'a', order: 5 },
      { id: 'b', order: 1 },
      { id: 'c', order: 3 },
    ],
    2,
  )
  assert.deepEqual(
    all.map((c) => c.resourceId),
    ['early-0', 'early-1', 'b', 'c', 'a'],
  )
})

test('two events of one resource keep their revision order even when their orders say otherwise', () => {
  const { all } = ordered([
    { id: 'r', order: 9 },
    { id: 'x', order: 4 },
    { id: 'r', order: 2 },
  ])
  assert.deepEqual(
    all.map((c) => `${c.resourceId}@${c.revision}`),
    ['r@1', 'x@1', 'r@2'],
  )
})

test('property: same events, per-resource revisions ascending, orders ascending wherever no resource forbids it', () => {
  fc.assert(
    fc.property(
      fc.array(fc.record({ id: fc.constantFrom('a', 'b', 'c', 'd'), order: fc.integer({ min: 0, max: 20 }) }), { maxLength: 40 }),
      (events) => {
        const { all } = ordered(events)
        assert.equal(all.length, events.length)
        const last = new Map<string, number>()
        for (const c of all) {
          assert.ok(c.revision > (last.get(c.resourceId) ?? 0), `${c.resourceId} revisions ascend`)
          last.set(c.resourceId, c.revision)
        }
        // With one event per resource, the result is exactly the stable sort by order.
        const distinct = events.filter((e, i) => events.findIndex((f) => f.id === e.id) === i)
        if (distinct.length === events.length) {
          const expected = events
            .map((e, i) => ({ ...e, i }))
            .sort((x, y) => x.order - y.order || x.i - y.i)
            .map((e) => e.id)
          assert.deepEqual(
            all.map((c) => c.resourceId),
            expected,
          )
        }
      },
    ),
  )
})
