import type { AheadOfBegin, Queryable, Store, Tx } from './store.ts'

/**
 * Frees the request's concurrency slot inside `tx`; call the returned function once `tx` has committed. Where
 * the gate keeps its slots out of the store, both do nothing and the slot is freed when the response is sent.
 */
export interface SlotRelease {
  releaseIn(tx: Queryable): Promise<() => void>
  /**
   * A request whose gate has not run yet: the gate, to send on the transaction's connection ahead of its BEGIN
   * (AheadOfBegin, src/store/store.ts); it takes the slot `releaseIn` then frees, and rejects when the request is
   * refused. Absent once the gate has run (or where it is not in the store).
   */
  admitIn?: AheadOfBegin
}

/** For writes outside a request (the seed, workers): there is no slot to free. */
export const NO_SLOT: SlotRelease = { releaseIn: async () => () => {} }

/**
 * A request's one transaction, which also frees the request's concurrency slot before COMMIT (issue 12: "a request
 * that has a transaction releases its slot in that transaction"), and whose request gate, when it has not run yet,
 * leaves ahead of its BEGIN (`SlotRelease.admitIn`). `fn` may free it itself (`release`), to send that
 * statement with others in one round trip; otherwise it is the transaction's last statement.
 */
export async function inRequestTransaction<T>(
  store: Pick<Store, 'transaction'>,
  slot: SlotRelease,
  fn: (tx: Tx, release: () => Promise<void>) => Promise<T>,
): Promise<T> {
  let released: (() => void) | undefined
  const admitIn = slot.admitIn
  /** Whether the store sent the gate ahead of this attempt's BEGIN, as every store must before it runs `fn`. */
  let gateSent = false
  const result = await store.transaction(
    async (tx) => {
      released = undefined
      // A store (or a wrapper of one) that dropped the gate would run the write unadmitted: refused, nothing saved.
      if (admitIn && !gateSent) throw new Error('the store did not send the request gate ahead of BEGIN (AheadOfBegin)')
      gateSent = false
      const out = await fn(tx, async () => {
        released = await slot.releaseIn(tx)
      })
      if (!released) released = await slot.releaseIn(tx)
      return out
    },
    admitIn &&
      ((connection) => {
        gateSent = true
        return admitIn(connection)
      }),
  )
  released?.()
  return result
}

/**
 * `tx`, counting the statements handed to it: the unit of work checks with it that every write of a flush reached
 * the store at once, before it lets COMMIT leave with them (`Tx.commit`; src/resources/unit-of-work.ts).
 */
export function countingSends(tx: Tx): { tx: Tx; sent(): number } {
  let sent = 0
  return {
    tx: {
      ...tx,
      query: (sql, params, options) => {
        sent++
        return tx.query(sql, params, options)
      },
    },
    sent: () => sent,
  }
}

/**
 * The answers of statements sent together (pipelined, in this order): each one's value, or the first failure in
 * sending order once every answer is in. A statement after a failed one fails only because the transaction is
 * aborted, and both failures can arrive in one tick: the first in time is not always the cause.
 */
export async function answersInOrder<const T extends readonly unknown[]>(sent: T): Promise<{ -readonly [K in keyof T]: Awaited<T[K]> }> {
  const settled = await Promise.allSettled(sent)
  const failed = settled.find((r) => r.status === 'rejected')
  if (failed) throw failed.reason
  return settled.map((r) => (r as PromiseFulfilledResult<unknown>).value) as { -readonly [K in keyof T]: Awaited<T[K]> }
}

/**
 * `tx`, until `seal()`: a statement sent through it afterwards is refused with `message` (the unit of work's writes
 * sent ahead must send every statement before they first await: src/resources/unit-of-work.ts, `send`).
 */
export function sealable(tx: Tx, message: string): { tx: Tx; seal(): void } {
  let open = true
  return {
    tx: {
      ...tx,
      query: (sql, params, options) => {
        if (!open) throw new Error(message)
        return tx.query(sql, params, options)
      },
    },
    seal: () => {
      open = false
    },
  }
}
