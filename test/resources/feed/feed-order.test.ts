import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { startTestApp } from '../../helpers/app.ts'
import { createTestDatabase, onPostgres } from '../../helpers/store.ts'

/**
 * The feed's append (src/resources/feed/store.ts): events are read in commit order, so a reader following
 * nextCursor while 16 writers commit sees every event exactly once.
 */
const customer = { type: 'person', name: { firstName: 'Ada', lastName: 'Lovelace' }, sourceReference: 'ledger/c/1' }

describe('feed paging is stable under concurrent writers', () => {
  test('a reader following nextCursor sees every committed event exactly once, in commit order', {
    skip: onPostgres ? false : 'needs PostgreSQL (set DATABASE_URL)',
  }, async () => {
    const db = await createTestDatabase()
    const w = await startTestApp({}, { db })
    try {
      const tn = await w.tenant('feedrace')
      const writers = Array.from({ length: 16 }, (_, wi) =>
        (async () => {
          for (let i = 0; i < 8; i++) {
            const res = await w.call('PUT', `/v1/clients/feedrace/customers/w${wi}-${i}`, { key: tn.apiKey, body: customer })
            assert.equal(res.status, 201)
          }
        })(),
      )
      let done = false
      const allWritten = Promise.all(writers).then(() => {
        done = true
      })
      const seen: string[] = []
      let after = ''
      for (let rounds = 0; rounds < 10_000; rounds++) {
        const finished = done
        const res = await w.call('GET', `/v1/clients/feedrace/changes?limit=7${after ? `&after=${after}` : ''}`, { key: tn.apiKey })
        seen.push(...res.json.data.map((e: { eventId: string }) => e.eventId))
        after = res.json.nextCursor
        if (finished && !res.json.hasMore) break
      }
      await allWritten
      const committed = await db.store.query<{ event_id: string }>(
        `SELECT event_id FROM change_events WHERE client_code = 'feedrace' ORDER BY seq`,
      )
      assert.equal(committed.length, 128)
      assert.deepEqual(
        seen,
        committed.map((e) => e.event_id),
      )
    } finally {
      await w.app.app.close()
      await db.drop()
    }
  })
})
