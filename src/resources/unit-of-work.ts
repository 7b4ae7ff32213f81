import type { Store, Tx } from '../store/store.ts'
import { answersInOrder, countingSends, sealable } from '../store/transactions.ts'
import { type ChangeActor, type ChangeInput, insertChanges } from './feed/store.ts'
import { recordSourceFreshFact } from './holds/client-facts-store.ts'
import { type SourceTouch, touchMakesFresh, writeSourceActivity } from './holds/source-activity-store.ts'
import { bumpReceivableRevisions, type HoldSnapshot, holdSnapshot } from './holds/store.ts'

/**
 * One write's unit of work: its transaction and everything the write decided but has not written yet.
 * A write receives it, writes through `tx`, and leaves three things here instead of writing them itself:
 *
 * - **feed events** (`appendChange`): the change-feed rows, inserted in one statement per client at the end.
 *   The per-client feed head row is then locked only for that last statement, no transaction ever takes a
 *   resource lock after the feed lock, and seq order is commit order.
 * - **hold watches** (`watchHolds`): the holds of Receivables a write may change, read before it changes them;
 *   `recordHoldChanges` gives each one whose holds differ afterwards a new revision and an event, unless this
 *   unit of work already changed it (one revision per Receivable per write).
 * - **the source-activity touch** (`touchSource`): the Source was heard from; written once per client. A stale
 *   client that becomes fresh records one client fact (src/resources/holds/client-facts-store.ts); its Receivables'
 *   revisions follow in the background, except those this unit of work changed, which the feed statement
 *   brings up to the client's last fact (one revision per Receivable per write, facts included).
 *
 * Whoever opened the transaction flushes it, visibly, before COMMIT: `executeWrite` (src/resources/operations.ts)
 * for a request's write, `inUnitOfWork` (below) for every other transaction, a batch chunk's included. Nothing is
 * kept per transaction anywhere else.
 */
export class UnitOfWork {
  /** Events in append order, by client. A list per client, appended in place: linear in the number of events. */
  private readonly events = new Map<string, ChangeInput[]>()
  private readonly touches = new Map<string, SourceTouch>()
  private readonly watched = new Map<string, HoldSnapshot>()
  /** Writes sent by `send` and not yet awaited: the flush awaits them with its own statements. */
  private readonly sentAhead: Promise<unknown>[] = []

  constructor(readonly tx: Tx) {}

  /**
   * A write whose answer nothing the operation still decides depends on: sent now and not awaited, so it travels
   * with the statements after it (the flush's, the render's, COMMIT): one round trip fewer (docs/decisions.md, "A
   * write in two round trips"). `write` must send every statement it sends before it first awaits: a statement it
   * sent later could find COMMIT already gone, so it is refused here, on both stores, and the write fails. Its
   * answer is the promise returned (the render may await it); its failure fails the flush, and so the transaction,
   * before COMMIT is waited for. Not between a `mark` and its rollback: a savepoint cannot take back a write not
   * yet answered.
   */
  send<T>(write: (tx: Tx) => Promise<T>): Promise<T> {
    const { tx, seal } = sealable(this.tx, 'a write sent ahead (UnitOfWork.send) sends every statement at once, before it awaits')
    const answer = write(tx)
    seal()
    // Awaited by the flush; until then a failure is not unhandled (the transaction fails with it there).
    answer.catch(() => {})
    this.sentAhead.push(answer)
    return answer
  }

  /**
   * Awaits the writes sent ahead now (the first failure in sending order is thrown): a batch record run alone does,
   * inside its savepoint, so that what it sent is its own outcome and the next record may mark a savepoint.
   */
  async settleSent(): Promise<void> {
    if (this.sentAhead.length > 0) await answersInOrder(this.sentAhead.splice(0))
  }

  /**
   * Who acts in this unit of work, recorded on its feed rows (migration 0038): the service itself unless the one
   * who opened it says otherwise (a request's write names its Integration's key or the operator; a provider's event
   * its provider).
   */
  actor: ChangeActor = { type: 'service' }

  appendChange(clientCode: string, change: ChangeInput): void {
    const list = this.events.get(clientCode)
    if (list) list.push(change)
    else this.events.set(clientCode, [change])
  }

  appendChanges(clientCode: string, changes: readonly ChangeInput[]): void {
    for (const c of changes) this.appendChange(clientCode, c)
  }

  /** Where the current operation's events start, per client (a batch chunk runs many operations in one unit). */
  private operationStart = new Map<string, number>()

  /** A new operation starts (runOperation): hold changes skip only the Receivables this operation changed. */
  beginOperation(): void {
    this.operationStart = new Map([...this.events].map(([c, list]) => [c, list.length]))
  }

  /** Receivables the current operation gave a new revision (their events are buffered). */
  changedReceivables(clientCode: string): Set<string> {
    const ids = new Set<string>()
    const events = this.events.get(clientCode) ?? []
    for (let i = this.operationStart.get(clientCode) ?? 0; i < events.length; i++) {
      const c = events[i] as ChangeInput
      if (c.resourceType === 'receivable') ids.add(c.resourceId)
    }
    return ids
  }

  /**
   * Reads the holds of these Receivables now (the first watch of a Receivable wins), so that
   * `recordHoldChanges` can tell which ones the write changed. Call it before the writes that may change them.
   */
  async watchHolds(clientCode: string, ids: readonly string[]): Promise<void> {
    let watched = this.watched.get(clientCode)
    if (!watched) {
      watched = new Map()
      this.watched.set(clientCode, watched)
    }
    const fresh = ids.filter((id) => !watched.has(id))
    if (fresh.length === 0) return
    const before = await holdSnapshot(this.tx, clientCode, fresh)
    for (const id of fresh) watched.set(id, before.get(id) ?? '')
  }

  /**
   * Step 2 of a write: every watched Receivable whose holds now differ, and that the operation has not already
   * changed, gets a new revision and a `receivable.updated` event. One read of the holds per client. An operation
   * may call it itself where its events must follow in the feed; runOperation calls it after every operation.
   */
  async recordHoldChanges(now: string): Promise<void> {
    for (const [clientCode, before] of this.watched) {
      if (before.size === 0) continue
      const after = await holdSnapshot(this.tx, clientCode, [...before.keys()])
      const skip = this.changedReceivables(clientCode)
      const changed = [...before.keys()].filter((id) => !skip.has(id) && before.get(id) !== after.get(id))
      if (changed.length > 0) this.appendChanges(clientCode, await bumpReceivableRevisions(this.tx, clientCode, { only: changed }, now))
    }
    this.watched.clear()
  }

  /** The Source was heard from: a Source write (feed mode of its grant) or a balance snapshot (with its position). */
  touchSource(clientCode: string, feedMode: string, now: string, snapshotPosition?: number): void {
    const snapshot = snapshotPosition ?? this.touches.get(clientCode)?.snapshotPosition
    this.touches.set(clientCode, { feedMode, now, ...(snapshot !== undefined ? { snapshotPosition: snapshot } : {}) })
  }

  /**
   * Steps 3 and 4 of a write, just before COMMIT: the source-activity touch (a stale client that becomes fresh
   * flips its recorded freshness and records one client fact: its Receivables' new revisions follow in the
   * background, src/workers/client-fanout.ts), then the feed, one statement per client in client order. That
   * statement also brings every Receivable this unit of work gave a new revision up to the client's last fact
   * (insertChanges), so a write's revision includes every client-wide change committed before it and the
   * background fan-out does not give that Receivable a second revision for the same fact.
   */
  async flush(): Promise<void> {
    await this.flushWith(async () => undefined)
  }

  /**
   * `flush`, and `after` (a write's render and its slot's release) in the same round trip, and COMMIT with them when
   * `commit` is given (`Tx.commit`): every statement is sent before any answer is awaited (docs/decisions.md, "A
   * write in two round trips"). The touch's stale-to-fresh flip, rare, must record its client fact before the feed
   * statement (which reads the client's last fact): the touch takes the fact's number in its own statement and the
   * fact's statement right after it stores the fact only when the touch flipped, so no answer is needed to order
   * them. Returns what `after` returned.
   */
  async flushWith<R>(after: () => Promise<R>, commit?: () => void): Promise<R> {
    if ([...this.watched.values()].some((m) => m.size > 0)) throw new Error('watched holds were never recorded (recordHoldChanges)')
    const touches = [...this.touches]
    this.touches.clear()
    const feeds = [...this.events.keys()].sort().flatMap((clientCode) => {
      const events = this.events.get(clientCode) ?? []
      return events.length > 0 ? [[clientCode, events] as const] : []
    })
    this.events.clear()
    // Each write of the flush must be on the wire before COMMIT may follow it unanswered: one that sent nothing at
    // once (its own code failed before its statement, or waits on something first) makes COMMIT wait for the answers,
    // so that a flush that did not reach the database whole can never commit.
    const { tx, sent: onWire } = countingSends(this.tx)
    let whole = true
    const sent: Promise<unknown>[] = []
    const send = (write: () => Promise<unknown>) => {
      const before = onWire()
      sent.push(write())
      if (onWire() === before) whole = false
    }
    for (const [clientCode, touch] of touches) {
      send(() => writeSourceActivity(tx, clientCode, touch))
      // A change of the client-wide source_stale hold: one fact, not a revision of each Receivable here.
      if (touchMakesFresh(touch)) send(() => recordSourceFreshFact(tx, clientCode, touch.now))
    }
    for (const [clientCode, events] of feeds) send(() => insertChanges(tx, clientCode, events, this.actor))
    // `after` only reads and frees the slot: should it fail before its statements, what the flush wrote stands whole.
    const answer = after()
    if (whole) commit?.()
    // The first failure in sending order: the writes sent ahead, the flush, `after`.
    await answersInOrder([...this.sentAhead.splice(0), ...sent, answer])
    this.markAppended(feeds)
    return answer
  }

  private markAppended(feeds: readonly (readonly [string, readonly ChangeInput[]])[]): void {
    if (feeds.length > 0) this.feedAppended = true
    for (const [, events] of feeds) for (const e of events) this.appendedTypes.add(e.type)
  }

  /**
   * True once a flush appended feed events: whoever commits the transaction then tells `onFeedAppended` (the
   * webhook dispatcher's wake-up), after COMMIT and never inside it.
   */
  feedAppended = false

  /** The types of the feed events appended: a delivery channel is woken only for the events it concerns. */
  readonly appendedTypes = new Set<string>()

  /** The events appended since `mark`, with their client, in append order. */
  eventsSince(mark: UnitOfWorkMark): [string, ChangeInput][] {
    const out: [string, ChangeInput][] = []
    for (const [clientCode, list] of this.events) {
      for (let i = mark.events.get(clientCode) ?? 0; i < list.length; i++) out.push([clientCode, list[i] as ChangeInput])
    }
    return out
  }

  /**
   * Sorts the events appended since `mark` by `orderOf`, stably, but never reorders two events of one resource
   * (they keep their append order, which is their revision order): a batch chunk runs its records in waves, and
   * its events must still reach the feed in the records' array order.
   */
  orderEventsSince(mark: UnitOfWorkMark, orderOf: (change: ChangeInput) => number): void {
    for (const [clientCode, list] of this.events) {
      const tail = list.splice(mark.events.get(clientCode) ?? 0).map((change, i) => ({ change, i, order: orderOf(change) }))
      // Per resource, its events (in append order) take its orders in ascending order.
      const byResource = new Map<string, typeof tail>()
      for (const t of tail) {
        const key = `${t.change.resourceType}:${t.change.resourceId}`
        const group = byResource.get(key)
        if (group) group.push(t)
        else byResource.set(key, [t])
      }
      for (const group of byResource.values()) {
        const orders = group.map((t) => t.order).sort((a, b) => a - b)
        group.forEach((t, k) => {
          t.order = orders[k] as number
        })
      }
      tail.sort((a, b) => a.order - b.order || a.i - b.i)
      for (const t of tail) list.push(t.change)
    }
  }

  /** Where this unit of work stands (before a savepoint), to return to it when the savepoint is rolled back. */
  mark(): UnitOfWorkMark {
    if (this.sentAhead.length > 0) throw new Error('a write sent ahead (UnitOfWork.send) is not yet flushed: no savepoint can take it back')
    return {
      events: new Map([...this.events].map(([c, list]) => [c, list.length])),
      touches: new Map(this.touches),
      watched: new Map([...this.watched].map(([c, m]) => [c, new Map(m)])),
    }
  }

  rollbackTo(mark: UnitOfWorkMark): void {
    for (const [clientCode, list] of this.events) {
      const keep = mark.events.get(clientCode) ?? 0
      if (keep === 0) this.events.delete(clientCode)
      else list.splice(keep)
    }
    this.touches.clear()
    for (const [c, t] of mark.touches) this.touches.set(c, t)
    this.watched.clear()
    for (const [c, m] of mark.watched) this.watched.set(c, m)
  }
}

export interface UnitOfWorkMark {
  events: Map<string, number>
  touches: Map<string, SourceTouch>
  watched: Map<string, HoldSnapshot>
}

/**
 * The one way to open a transaction outside a request (a request's write is `executeWrite`,
 * src/resources/operations.ts): workers, sweepers, operator actions, the seed. The transaction comes with a unit of
 * work, flushed before COMMIT; `fn`'s result is returned once committed, and `onFeedAppended` is told then (never
 * inside the transaction) when the flush appended change-feed events. A transaction that buffers nothing (an
 * operator write and its audit row, a delivery's lease) flushes nothing: no statement. test/architecture.test.ts
 * holds the tree to these two: no other `.transaction(` or `new UnitOfWork(` outside src/store/.
 */
export async function inUnitOfWork<T>(
  store: Store,
  fn: (uow: UnitOfWork) => Promise<T>,
  onFeedAppended?: (types?: ReadonlySet<string>) => void,
): Promise<T> {
  let appended: ReadonlySet<string> | null = null
  const result = await store.transaction(async (tx) => {
    const uow = new UnitOfWork(tx)
    const out = await fn(uow)
    // The flush and COMMIT in one round trip: nothing is checked after the flush.
    await uow.flushWith(async () => undefined, tx.commit && (() => tx.commit?.()))
    if (uow.feedAppended) appended = uow.appendedTypes
    return out
  })
  // After COMMIT (the delivery channels' wake-up): the committed result stands whatever it does.
  if (appended) onFeedAppended?.(appended)
  return result
}
