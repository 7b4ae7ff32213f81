import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { createWorker } from '../../src/workers/worker.ts'

/** The one worker shape (src/workers/worker.ts): one turn at a time, wake-ups coalesced, stop waits, errors logged. */
describe('createWorker', () => {
  test('wake-ups are coalesced into one turn; turns never overlap; stop waits for the turn in progress', async () => {
    let running = 0
    let overlapped = false
    let turns = 0
    let release: () => void = () => {}
    const worker = createWorker({
      name: 'probe',
      intervalMs: 60_000,
      firstTurnAfterMs: 60_000,
      runOnce: async () => {
        running++
        overlapped ||= running > 1
        turns++
        await new Promise<void>((r) => {
          release = r
        })
        running--
        return false
      },
      onError: (err) => assert.fail(String(err)),
    })
    worker.start()
    for (let i = 0; i < 5; i++) worker.wake()
    await new Promise((r) => setTimeout(r, 20))
    assert.equal(turns, 1)
    // Woken while running: one more turn once this one ends, however many wake-ups.
    for (let i = 0; i < 5; i++) worker.wake()
    release()
    await new Promise((r) => setTimeout(r, 20))
    assert.equal(turns, 2)
    let stopped = false
    const stopping = worker.stop().then(() => {
      stopped = true
    })
    await new Promise((r) => setTimeout(r, 20))
    assert.equal(stopped, false, 'stop waits for the turn in progress')
    release()
    await stopping
    assert.equal(turns, 2)
    assert.equal(overlapped, false)
  })

  test('an error of a turn is given to onError and the schedule goes on; a wake-up respects the least gap', async () => {
    const errors: unknown[] = []
    const starts: number[] = []
    const worker = createWorker({
      name: 'failing',
      intervalMs: 60_000,
      minWakeGapMs: 100,
      runOnce: async () => {
        starts.push(performance.now())
        throw new Error('boom')
      },
      onError: (err) => errors.push(err),
    })
    worker.start()
    await new Promise((r) => setTimeout(r, 10))
    worker.wake()
    await new Promise((r) => setTimeout(r, 300))
    await worker.stop()
    assert.equal(starts.length, 2)
    assert.ok((starts[1] as number) - (starts[0] as number) >= 95, 'the woken turn waited for the gap')
    assert.equal(errors.length, 2)
  })
})
