/**
 * Requests in flight, at most the API key's concurrency: the service answers a request over the key's
 * `CONCURRENCY_PER_KEY` (1 by default) with `429 rate_limit_exceeded` at once, so the SDK queues instead of sending
 * more at a time. Calls beyond the limit wait, in the order they were made, for an earlier one's answer (its
 * status and headers: the service gives the key's slot back before it sends an answer). A call whose AbortSignal
 * fires while it waits leaves the queue with the signal's reason.
 *
 * Each attempt takes a place on its own (a retry queues again, after its wait), so a retry's `Retry-After` never
 * holds up the other calls.
 */
export function queuedFetch(base: (input: Request) => Promise<Response>, concurrency: number): (input: Request) => Promise<Response> {
  if (!Number.isInteger(concurrency) || concurrency < 1) {
    throw new TypeError(
      `createClient: concurrency must be a whole number of at least 1 (the key's CONCURRENCY_PER_KEY), got ${concurrency}`,
    )
  }
  let inFlight = 0
  const waiting: { go: () => void }[] = []
  const next = () => {
    inFlight--
    waiting.shift()?.go()
  }
  const place = (signal: AbortSignal): Promise<void> => {
    if (inFlight < concurrency) {
      inFlight++
      return Promise.resolve()
    }
    return new Promise((resolve, reject) => {
      if (signal.aborted) return reject(signal.reason)
      const entry = {
        go: () => {
          signal.removeEventListener('abort', onAbort)
          inFlight++
          resolve()
        },
      }
      const onAbort = () => {
        const i = waiting.indexOf(entry)
        if (i !== -1) waiting.splice(i, 1)
        reject(signal.reason)
      }
      signal.addEventListener('abort', onAbort, { once: true })
      waiting.push(entry)
    })
  }
  return async (request) => {
    await place(request.signal)
    try {
      return await base(request)
    } finally {
      next()
    }
  }
}
