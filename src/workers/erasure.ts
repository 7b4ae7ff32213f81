import { randomUUID } from 'node:crypto'
import type { Clock } from '../domain/time.ts'
import { type ErasureService, scrub } from '../resources/erasure/service.ts'
import {
  advanceErasure,
  allClients,
  auditAfter,
  claimErasure,
  customersPastRetention,
  type ErasureRow,
  eraseBatchRecords,
  erasePaymentRequestTexts,
  erasureClients,
  releaseErasure,
  rewriteAuditDetails,
} from '../resources/erasure/store.ts'
import { inUnitOfWork } from '../resources/unit-of-work.ts'
import type { Store } from '../store/store.ts'
import { createWorker, type Worker } from './worker.ts'

/**
 * The erasure worker (docs/decisions.md, "Erasure of a Customer's personal data"): follows up each recorded erasure
 * in chunks of at most CHUNK rows, one transaction each, in a fixed order of steps (batch records, Payment request
 * texts, audit details, done). Guarantees:
 * - Per client: it finds the clients with pending erasures (one named read across clients), then claims one
 *   erasure of a client at a time under a lease token (`FOR UPDATE SKIP LOCKED`, single-shard), so two instances
 *   never work on the same erasure and a stale one cannot record progress (every chunk checks the token).
 * - Safe across kill -9: a chunk's erasures and its progress (`step`, `after_seq`) commit together; a lease left
 *   by a dead process expires after LEASE_MS and the next claim resumes at the recorded step. Each step's update
 *   takes only rows not erased yet, so a repeated chunk changes nothing twice.
 * - With PERSONAL_DATA_RETENTION_DAYS set, once a minute it records the erasure of the Customers past retention
 *   (per client, RETENTION_PER_CLIENT a turn), through the same `erase` as the request.
 */
export const CHUNK = 500
export const LEASE_MS = 30_000
const RETENTION_PER_CLIENT = 100

export interface ErasureWorkerOptions {
  store: Store
  clock: Clock
  erasure: Pick<ErasureService, 'erase'>
  retentionDays?: number | undefined
  intervalMs?: number
  onError: (err: unknown) => void
}

export function createErasureWorker(opts: ErasureWorkerOptions) {
  const { store, clock } = opts
  const at = (ms = 0) => new Date(clock.now().getTime() + ms).toISOString()

  /** One chunk of the claimed erasure: true while more remains. Throws when the lease was lost (nothing kept). */
  async function chunk(clientCode: string, e: ErasureRow, token: string): Promise<boolean> {
    return inUnitOfWork(store, async ({ tx }) => {
      let step = e.step
      let afterSeq = e.after_seq
      if (step === 'batch_records') {
        const n = await eraseBatchRecords(tx, clientCode, e.external_customer_id, { erased: true }, CHUNK)
        if (n < CHUNK) step = 'payment_requests'
      } else if (step === 'payment_requests') {
        const n = await erasePaymentRequestTexts(tx, clientCode, e.external_customer_id, CHUNK)
        if (n < CHUNK) step = 'audit'
      } else if (step === 'audit') {
        const rows = await auditAfter(tx, clientCode, afterSeq, CHUNK)
        const values = e.erased_strings ?? []
        const changed = rows.flatMap((r) => {
          const s = scrub(r.details, values)
          return s.changed ? [{ seq: r.seq, details: s.value }] : []
        })
        await rewriteAuditDetails(tx, clientCode, changed)
        afterSeq = rows.at(-1)?.seq ?? afterSeq
        if (rows.length < CHUNK) step = 'done'
      }
      if (!(await advanceErasure(tx, clientCode, e.external_customer_id, token, { step, afterSeq, now: at(), until: at(LEASE_MS) })))
        throw new Error('erasure lease lost')
      e.step = step
      e.after_seq = afterSeq
      return step !== 'done'
    })
  }

  /** One erasure of the client, claimed and followed to its end (or until a chunk fails). */
  async function runClient(clientCode: string): Promise<boolean> {
    const token = randomUUID()
    const e = await claimErasure(store, clientCode, token, at(), at(LEASE_MS))
    if (!e) return false
    try {
      while (await chunk(clientCode, e, token)) {}
    } catch (err) {
      await releaseErasure(store, clientCode, e.external_customer_id, token, (err as Error).name || 'Error')
      throw err
    }
    return true
  }

  /** Records the erasure of the Customers past retention, per client; how many. */
  async function retain(days: number): Promise<number> {
    const cutoff = at(-days * 86_400_000)
    let n = 0
    for (const clientCode of await allClients(store)) {
      for (const id of await customersPastRetention(store, clientCode, cutoff, RETENTION_PER_CLIENT)) {
        const recorded = await inUnitOfWork(store, (uow) => opts.erasure.erase(uow, clientCode, id, 'retention', at()))
        if (recorded) n++
      }
    }
    return n
  }

  const worker: Worker = createWorker({
    name: 'erasure',
    intervalMs: opts.intervalMs ?? 1_000,
    repeatWhileWorking: true,
    async runOnce() {
      let worked = false
      for (const clientCode of await erasureClients(store, at(), 16)) worked = (await runClient(clientCode)) || worked
      return worked
    },
    onError: opts.onError,
  })

  const retention: Worker | undefined =
    opts.retentionDays === undefined
      ? undefined
      : createWorker({
          name: 'personal-data-retention',
          intervalMs: 60_000,
          firstTurnAfterMs: 60_000,
          async runOnce() {
            const n = await retain(opts.retentionDays as number)
            if (n > 0) worker.wake()
            return n > 0
          },
          onError: opts.onError,
        })

  return { worker, retention, retain }
}
