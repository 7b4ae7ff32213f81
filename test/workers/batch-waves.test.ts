import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { nextWave, type WaveItem } from '../../src/workers/batch-waves.ts'

/** `id` writes `w` and reads `r` (comma-separated keys); `dep` names records it depends on; `!` makes it a barrier. */
function item(spec: string): WaveItem {
  const [id = '', w = '', r = '', dep = ''] = spec.split(' ')
  const list = (s: string) => (s === '-' || s === '' ? [] : s.split(','))
  return { recordId: id.replace('!', ''), dependsOn: list(dep), keys: { writes: list(w), reads: list(r) }, barrier: id.startsWith('!') }
}

/** Every wave, run to the end: barriers as `!id`, waves as their record ids. */
function plan(specs: string[]): string[] {
  let remaining = specs.map(item)
  const steps: string[] = []
  while (remaining.length > 0) {
    const step = nextWave(remaining)
    if ('barrier' in step) {
      steps.push(`!${remaining[0]?.recordId}`)
      remaining = remaining.slice(1)
      continue
    }
    steps.push(step.wave.map((i) => remaining[i]?.recordId).join(' '))
    const taken = new Set(step.wave)
    remaining = remaining.filter((_, i) => !taken.has(i))
  }
  return steps
}

describe('the wave plan of a chunk', () => {
  test('records of distinct resources run in one wave', () => {
    assert.deepEqual(plan(['c1 customer:1', 'c2 customer:2', 'c3 customer:3']), ['c1 c2 c3'])
  })

  test('records of one resource keep array order, one per wave', () => {
    assert.deepEqual(plan(['a customer:1', 'b customer:1', 'c customer:2', 'd customer:1']), ['a c', 'b', 'd'])
  })

  test('a read waits for an earlier write of its key, a write for an earlier read; reads share a wave', () => {
    assert.deepEqual(plan(['c1 customer:1', 'r1 receivable:1 customer:1', 'r2 receivable:2 customer:2']), ['c1 r2', 'r1'])
    assert.deepEqual(plan(['r1 receivable:1 customer:1', 'r2 receivable:2 customer:1', 'c1 customer:1']), ['r1 r2', 'c1'])
  })

  test('a record waits for the records it depends on, and so does every later record of its resources', () => {
    assert.deepEqual(plan(['c1 customer:1', 'r1 receivable:1 - c1', 'a1 adj:1,receivable:1 - r1', 'x customer:9']), ['c1 x', 'r1', 'a1'])
    // A dependency done in an earlier chunk (not among the records still to run) holds nothing back.
    assert.deepEqual(plan(['r1 receivable:1 - c0']), ['r1'])
  })

  test('a barrier runs alone, after every earlier record and before every later one', () => {
    assert.deepEqual(plan(['a customer:1', 'b customer:1', '!p', 'c customer:3', 'd customer:4']), ['a', 'b', '!p', 'c d'])
    assert.deepEqual(plan(['!p', 'a customer:1']), ['!p', 'a'])
  })

  test('a record with nothing to write (refused before it runs) conflicts with nothing but waits for its dependencies', () => {
    const refused: WaveItem = { recordId: 'bad', dependsOn: ['c1'], keys: undefined, barrier: false }
    let remaining = [item('c1 customer:1'), refused, item('c2 customer:1')]
    let step = nextWave(remaining)
    assert.deepEqual(step, { wave: [0] })
    remaining = remaining.slice(1)
    step = nextWave(remaining)
    assert.deepEqual(step, { wave: [0, 1] })
  })
})
