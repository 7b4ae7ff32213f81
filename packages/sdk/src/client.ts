import createOpenApiClient, {
  type Client,
  type ClientPathsWithMethod,
  defaultPathSerializer,
  type FetchResponse,
  type MaybeOptionalInit,
} from 'openapi-fetch'
import { ApiError, errorFor } from './errors.ts'
import type { components, paths } from './generated/schema.ts'
import { queuedFetch } from './queue.ts'
import { defaultSleep, type RetryOptions, retryingFetch } from './retry.ts'

export const SDK_VERSION = '1.0.0'

type Simplify<T> = { [K in keyof T]: T[K] } & {}

/** Path parameters without `clientCode`: the bound client fills it in. */
type WithoutClientCodeParameters<P> = P extends { path: infer Path }
  ? 'clientCode' extends keyof Path
    ? keyof Omit<Path, 'clientCode'> extends never
      ? Simplify<Omit<P, 'path'> & { path?: never }>
      : Simplify<Omit<P, 'path'> & { path: Simplify<Omit<Path, 'clientCode'> & { clientCode?: never }> }>
    : P
  : P

type WithoutClientCodeOperation<O> = O extends { parameters: infer P }
  ? Simplify<Omit<O, 'parameters'> & { parameters: WithoutClientCodeParameters<P> }>
  : O

export type Schemas = components['schemas']

/**
 * The body of each batch record kind: exactly the body of that kind's synchronous PUT. The generated schema types
 * a record's `body` as any object (the service validates it when the record runs); the SDK types it by `kind`.
 */
export interface BatchRecordBodies {
  customer: Schemas['CustomerWrite']
  receivable: Schemas['ReceivableWrite']
  payment_observation: Schemas['PaymentObservationWrite']
  adjustment: Schemas['AdjustmentWrite']
  credit_note: Schemas['CreditNoteWrite']
  write_off: Schemas['WriteOffWrite']
}
type GeneratedBatchRecord = Schemas['BatchRecord']
// Every kind the service takes has a body type here (a new kind in the generated types fails this line).
const everyKindTyped: Record<GeneratedBatchRecord['kind'], true> = {} as Record<keyof BatchRecordBodies, true>
void everyKindTyped

/** A batch record, typed by its `kind`: `body` must be a complete body of that kind's synchronous PUT. */
export type BatchRecord = {
  [K in keyof BatchRecordBodies]: Simplify<Omit<GeneratedBatchRecord, 'kind' | 'body'> & { kind: K; body: BatchRecordBodies[K] }>
}[keyof BatchRecordBodies]
export type Batch = Schemas['Batch']
/** A new batch of typed records, or a retry of an earlier batch's failed and blocked records (`retryOf`), never both. */
export type BatchWrite = { records: BatchRecord[]; retryOf?: never } | { retryOf: string; records?: never }
export type BookCompletionWrite = Schemas['BookCompletionWrite']
export type BookCompletionPreview = Schemas['BookCompletionPreview']

/** An operation whose JSON request body is a BatchWrite takes the SDK's typed BatchWrite instead. */
type WithTypedBatchRecords<O> = O extends { requestBody: { content: { 'application/json': Schemas['BatchWrite'] } } }
  ? Simplify<Omit<O, 'requestBody'> & { requestBody: { content: { 'application/json': BatchWrite } } }>
  : O

/**
 * The generated `paths` of the client-scoped API (`/v1/clients/{clientCode}/...`), with `clientCode` taken out
 * of every operation's path parameters (a client created by `createClient` is bound to one client code) and batch
 * records typed by kind.
 */
export type ClientPaths = {
  [Path in keyof paths as Path extends `/v1/clients/{clientCode}/${string}` | `/v1/clients/{clientCode}` ? Path : never]: {
    [M in keyof paths[Path]]: M extends 'parameters' ? paths[Path][M] : WithTypedBatchRecords<WithoutClientCodeOperation<paths[Path][M]>>
  }
}
export type ChangeEvent = Schemas['ChangeEvent']
export type ChangePage = Schemas['ChangePage']

/** The lists of the API (`?cursor=&limit=` and their filters): a path's query parameters, without clientCode. */
type ListQuery<P extends keyof paths> = paths[P] extends { get: { parameters: { query?: infer Q } } } ? NonNullable<Q> : never
export type PaymentRequestListQuery = ListQuery<'/v1/clients/{clientCode}/payment-requests'>
export type RecoveryInstructionListQuery = ListQuery<'/v1/clients/{clientCode}/recovery-instructions'>
export type PaymentReconciliationListQuery = ListQuery<'/v1/clients/{clientCode}/payment-reconciliations'>
export type FinancialEventListQuery = ListQuery<'/v1/clients/{clientCode}/adjustments'>
export type PaymentObservationListQuery = ListQuery<'/v1/clients/{clientCode}/payment-observations'>
export type BatchListQuery = ListQuery<'/v1/clients/{clientCode}/batches'>

/** Options of one list call. */
export interface ListOptions {
  signal?: AbortSignal
}

type Method = 'get' | 'put' | 'post' | 'patch'
type RawClient = Client<ClientPaths, `${string}/${string}`>
type PathsFor<M extends Method> = ClientPathsWithMethod<RawClient, M>
// biome-ignore lint/complexity/noBannedTypes: `{} extends Pick<T, K>` is the test for an optional key
type RequiredKeys<T> = { [K in keyof T]-?: {} extends Pick<T, K> ? never : K }[keyof T]
type InitArgument<Init> =
  RequiredKeys<Init> extends never ? [init?: Init & { [key: string]: unknown }] : [init: Init & { [key: string]: unknown }]
type Operation<P extends keyof ClientPaths, M extends Method> = ClientPaths[P][M & keyof ClientPaths[P]] & Record<string | number, unknown>

/**
 * A page of a list (`{data, nextCursor}`; the change feed's `{data, nextCursor, hasMore}`), which is also an async
 * iterable over every item of the list from this page on: iterating fetches the following pages as it goes, with
 * the same path, query and options (`for await (const c of await irs.GET('/v1/clients/{clientCode}/customers'))`).
 */
export type Page<T> = T & AsyncIterable<T extends { data: readonly (infer Item)[] } ? Item : never>

/** A list's answer (an object with a `data` array and a `nextCursor`) becomes a Page; any other answer is itself. */
export type Paged<T> = T extends { data: readonly unknown[]; nextCursor: string | null } ? Page<T> : T

/** The body of a 2xx answer of an operation (the union when it has several); a list's answer is a Page. */
export type ResponseData<P extends keyof ClientPaths, M extends Method, Init = object> = Paged<
  NonNullable<FetchResponse<Operation<P, M>, Init, `${string}/${string}`>['data']>
>

interface PageBody {
  data: unknown[]
  nextCursor: string | null
  hasMore?: boolean
}

function isPageBody(body: unknown): body is PageBody {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return false
  const b = body as Record<string, unknown>
  return Array.isArray(b.data) && (typeof b.nextCursor === 'string' || b.nextCursor === null)
}

/**
 * The one auto-paging mechanism: makes `first` (a page already fetched) an async iterable over its items and those
 * of every following page. `next(cursor)` fetches the page after `cursor`. A list ends at `nextCursor: null`; the
 * change feed (a page with `hasMore`) ends at `hasMore: false`. The iterator is a non-enumerable property, so the
 * page still prints, serializes and compares as the body the service sent.
 */
export function autoPage<T extends PageBody>(first: T, next: (cursor: string) => Promise<unknown>): Page<T> {
  async function* items(): AsyncGenerator<unknown> {
    let page: PageBody = first
    for (;;) {
      yield* page.data
      const more = page.hasMore === undefined ? page.nextCursor !== null : page.hasMore
      if (!more || page.nextCursor === null) return
      const fetched = await next(page.nextCursor)
      if (!isPageBody(fetched)) throw new TypeError('auto-paging: the next page is not a list page')
      page = fetched
    }
  }
  Object.defineProperty(first, Symbol.asyncIterator, { value: items, enumerable: false, configurable: true, writable: true })
  return first as Page<T>
}

/** A typed call: resolves with the 2xx body, rejects with ProblemError (problem+json) or ApiError. */
export type SdkMethod<M extends Method> = <P extends PathsFor<M>, Init extends MaybeOptionalInit<ClientPaths[P], M>>(
  path: P,
  ...init: InitArgument<Init>
) => Promise<ResponseData<P, M, Init>>

export interface ClientOptions {
  /** The service's base address, for example `http://127.0.0.1:8080` (no `/v1`). */
  baseUrl: string
  /** The API key (`irk_sandbox_...` or `irk_production_...`). */
  apiKey: string | undefined
  /** The client code every call is made for (filled into every path's `{clientCode}`). */
  clientCode: string
  /** Retries of 429 and 503 (see RetryOptions); `false` turns them off. */
  retry?: RetryOptions | false
  /**
   * Requests in flight at once, at most (default 1, the service's default `CONCURRENCY_PER_KEY`): more calls wait
   * in order for an answer instead of being refused with 429. Set it to the key's concurrency if the service's is
   * higher; `false` sends every call at once.
   */
  concurrency?: number | false
  /** The fetch to send requests with (default globalThis.fetch). */
  fetch?: (input: Request) => Promise<Response>
  /** Extra headers on every request. */
  headers?: Record<string, string>
}

export interface RunBatchOptions {
  /** First wait between polls (default 250 ms); each wait is 1.5 times the previous, up to `maxPollIntervalMs`. */
  pollIntervalMs?: number
  /** Longest wait between polls (default 5 s; every poll counts against the key's rate limit). */
  maxPollIntervalMs?: number
  /** Give up after this long (default 10 minutes) with a BatchTimeoutError carrying the last state. */
  timeoutMs?: number
  signal?: AbortSignal
  /** Called with every state read, the PUT's answer first. */
  onProgress?: (batch: Batch) => void
}

export interface ChangeFeedOptions {
  /** Resume after this cursor (a stored `nextCursor`); omitted = from the oldest retained event. */
  after?: string
  /** Page size, 1 to 200 (the service's default 50 when omitted). */
  limit?: number
  /** Keep polling once caught up (default false: stop after the last page). */
  follow?: boolean
  /** Wait between polls once caught up, with `follow` (default 5 s). */
  pollIntervalMs?: number
  signal?: AbortSignal
}

export const FINAL_BATCH_STATUSES: readonly Batch['status'][] = ['succeeded', 'partially_succeeded', 'failed']

export class BatchTimeoutError extends Error {
  readonly batch: Batch
  constructor(batch: Batch, timeoutMs: number) {
    super(`batch ${batch.externalBatchId} still ${batch.status} after ${timeoutMs} ms`)
    this.name = 'BatchTimeoutError'
    this.batch = batch
  }
}

/**
 * The change feed as an async iterable of events, page after page (following `nextCursor`). `cursor` is where to
 * resume: the `nextCursor` of the last page all of whose events were taken (store it; pass it as `after`).
 */
export class ChangeFeed implements AsyncIterable<ChangeEvent> {
  #cursor: string | undefined
  readonly #pages: () => AsyncGenerator<ChangePage>

  constructor(pages: () => AsyncGenerator<ChangePage>, after: string | undefined) {
    this.#pages = pages
    this.#cursor = after
  }

  get cursor(): string | undefined {
    return this.#cursor
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<ChangeEvent> {
    for await (const page of this.#pages()) {
      for (const event of page.data) yield event
      this.#cursor = page.nextCursor
    }
  }
}

export interface InboundClient {
  readonly clientCode: string
  readonly baseUrl: string
  GET: SdkMethod<'get'>
  PUT: SdkMethod<'put'>
  POST: SdkMethod<'post'>
  PATCH: SdkMethod<'patch'>
  /** The underlying openapi-fetch client ({data, error, response}; never throws for an HTTP status), same retries. */
  raw: RawClient
  /** Submits a batch (PUT, an identical retry is safe) and polls it until it is final. */
  runBatch(externalBatchId: string, body: BatchWrite, options?: RunBatchOptions): Promise<Batch>
  /**
   * Submits a new batch `externalBatchId` of the records of the finished batch `retryOf` that failed or were blocked
   * (`{retryOf}`; an identical retry is safe) and polls it until it is final. Each record carries `retriedFrom`.
   */
  retryBatch(externalBatchId: string, retryOf: string, options?: RunBatchOptions): Promise<Batch>
  /** What declaring this complete book would flag and release now, changing nothing (the declaration's own checks). */
  previewBookCompletion(body: BookCompletionWrite, options?: { signal?: AbortSignal }): Promise<BookCompletionPreview>
  /** The change feed, page by page (every page fetched, empty ones included). */
  changePages(options?: ChangeFeedOptions): AsyncGenerator<ChangePage>
  /** The change feed, event by event across pages. */
  changes(options?: ChangeFeedOptions): ChangeFeed
  /**
   * One page of a list, newest first (each item as its GET answers it): pass a page's `nextCursor` as `cursor` for
   * the next one, until it is null. Filters as the service documents them (an unknown value is a ProblemError 422).
   */
  listPaymentRequests(query?: PaymentRequestListQuery, options?: ListOptions): Promise<Page<Schemas['PaymentRequestList']>>
  listRecoveryInstructions(query?: RecoveryInstructionListQuery, options?: ListOptions): Promise<Page<Schemas['RecoveryInstructionList']>>
  listPaymentReconciliations(
    query?: PaymentReconciliationListQuery,
    options?: ListOptions,
  ): Promise<Page<Schemas['PaymentReconciliationList']>>
  listAdjustments(query?: FinancialEventListQuery, options?: ListOptions): Promise<Page<Schemas['AdjustmentList']>>
  listCreditNotes(query?: FinancialEventListQuery, options?: ListOptions): Promise<Page<Schemas['CreditNoteList']>>
  listWriteOffs(query?: FinancialEventListQuery, options?: ListOptions): Promise<Page<Schemas['WriteOffList']>>
  listPaymentObservations(query?: PaymentObservationListQuery, options?: ListOptions): Promise<Page<Schemas['PaymentObservationList']>>
  /** The batches whose every record kind this key's grant may write. */
  listBatches(query?: BatchListQuery, options?: ListOptions): Promise<Page<Schemas['BatchList']>>
}

const EXTERNAL_ID = /^[A-Za-z0-9_-]{1,128}$/

/** A client bound to one service, API key and client code. */
export function createClient(options: ClientOptions): InboundClient {
  const { apiKey, clientCode } = options
  if (typeof apiKey !== 'string' || apiKey.length === 0)
    throw new TypeError('createClient: apiKey is required (the key printed at first start)')
  if (typeof clientCode !== 'string' || !EXTERNAL_ID.test(clientCode)) {
    throw new TypeError('createClient: clientCode must be 1 to 128 characters of A-Za-z0-9_-')
  }
  const url = new URL(options.baseUrl)
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new TypeError('createClient: baseUrl must be an http(s) URL')
  const baseUrl = url.href.replace(/\/+$/, '')
  const baseFetch = options.fetch ?? ((request: Request) => globalThis.fetch(request))
  const queued = options.concurrency === false ? baseFetch : queuedFetch(baseFetch, options.concurrency ?? 1)
  const raw: RawClient = createOpenApiClient<ClientPaths, `${string}/${string}`>({
    baseUrl,
    headers: { ...options.headers, authorization: `Bearer ${apiKey}`, 'user-agent': `inbound-receivables-sdk/${SDK_VERSION}` },
    fetch: options.retry === false ? queued : retryingFetch(queued, options.retry),
    // The bound client code always wins: a client never calls for another client by accident.
    pathSerializer: (pathname, params) => defaultPathSerializer(pathname, { ...params, clientCode }),
  })
  // openapi-fetch runs the path serializer only when a call has path parameters; a path whose only one is the
  // client code (`/changes`, `/source-freshness`, ...) arrives here with `{clientCode}` still in it (encoded).
  raw.use({
    onRequest({ request }) {
      const url = new URL(request.url)
      const pathname = url.pathname.replace(/%7BclientCode%7D|\{clientCode\}/, encodeURIComponent(clientCode))
      if (pathname === url.pathname) return undefined
      url.pathname = pathname
      return new Request(url, request)
    },
  })

  const method =
    <M extends Method>(verb: Uppercase<M>): SdkMethod<M> =>
    async (path, ...init) => {
      const request = raw.request as unknown as (
        m: string,
        p: string,
        i?: unknown,
      ) => Promise<{ data?: unknown; error?: unknown; response: Response }>
      const call = async (options: unknown) => {
        const { data, error, response } = await request(verb, path as string, options)
        if (!response.ok) throw errorFor(response, error)
        return data
      }
      const data = await call(init[0])
      if (verb !== 'GET' || !isPageBody(data)) return data as never
      // A list: the next page is the same call with the cursor (`after` for the change feed, `cursor` otherwise).
      const options = (init[0] ?? {}) as { params?: { query?: Record<string, unknown> } }
      const cursorName = data.hasMore === undefined ? 'cursor' : 'after'
      const nextPage = async (cursor: string): Promise<unknown> => {
        return call({ ...options, params: { ...options.params, query: { ...options.params?.query, [cursorName]: cursor } } })
      }
      return autoPage(data, nextPage) as never
    }

  const client: InboundClient = {
    clientCode,
    baseUrl,
    GET: method<'get'>('GET'),
    PUT: method<'put'>('PUT'),
    POST: method<'post'>('POST'),
    PATCH: method<'patch'>('PATCH'),
    raw,

    async runBatch(externalBatchId, body, o = {}) {
      const timeoutMs = o.timeoutMs ?? 600_000
      const maxPoll = o.maxPollIntervalMs ?? 5_000
      let wait = o.pollIntervalMs ?? 250
      const signal = o.signal ?? new AbortController().signal
      const deadline = Date.now() + timeoutMs
      let batch: Batch = await client.PUT('/v1/clients/{clientCode}/batches/{externalBatchId}', {
        params: { path: { externalBatchId } },
        body,
        signal,
      })
      o.onProgress?.(batch)
      while (!FINAL_BATCH_STATUSES.includes(batch.status)) {
        if (Date.now() + wait > deadline) throw new BatchTimeoutError(batch, timeoutMs)
        await defaultSleep(wait, signal)
        wait = Math.min(maxPoll, Math.ceil(wait * 1.5))
        batch = await client.GET('/v1/clients/{clientCode}/batches/{externalBatchId}', { params: { path: { externalBatchId } }, signal })
        o.onProgress?.(batch)
      }
      return batch
    },

    retryBatch: (externalBatchId, retryOf, o = {}) => client.runBatch(externalBatchId, { retryOf }, o),

    previewBookCompletion: (body, o = {}) => client.POST('/v1/clients/{clientCode}/book-completions/preview', { body, ...o }),

    async *changePages(o = {}) {
      const signal = o.signal ?? new AbortController().signal
      let after = o.after
      for (;;) {
        const query: { after?: string; limit?: number } = {}
        if (after !== undefined) query.after = after
        if (o.limit !== undefined) query.limit = o.limit
        const page: ChangePage = await client.GET('/v1/clients/{clientCode}/changes', { params: { query }, signal })
        yield page
        after = page.nextCursor
        if (page.hasMore) continue
        if (!o.follow) return
        await defaultSleep(o.pollIntervalMs ?? 5_000, signal)
      }
    },

    changes(o = {}) {
      return new ChangeFeed(() => client.changePages(o), o.after)
    },

    listPaymentRequests: (query = {}, o = {}) => client.GET('/v1/clients/{clientCode}/payment-requests', { params: { query }, ...o }),
    listRecoveryInstructions: (query = {}, o = {}) =>
      client.GET('/v1/clients/{clientCode}/recovery-instructions', { params: { query }, ...o }),
    listPaymentReconciliations: (query = {}, o = {}) =>
      client.GET('/v1/clients/{clientCode}/payment-reconciliations', { params: { query }, ...o }),
    listAdjustments: (query = {}, o = {}) => client.GET('/v1/clients/{clientCode}/adjustments', { params: { query }, ...o }),
    listCreditNotes: (query = {}, o = {}) => client.GET('/v1/clients/{clientCode}/credit-notes', { params: { query }, ...o }),
    listWriteOffs: (query = {}, o = {}) => client.GET('/v1/clients/{clientCode}/write-offs', { params: { query }, ...o }),
    listPaymentObservations: (query = {}, o = {}) =>
      client.GET('/v1/clients/{clientCode}/payment-observations', { params: { query }, ...o }),
    listBatches: (query = {}, o = {}) => client.GET('/v1/clients/{clientCode}/batches', { params: { query }, ...o }),
  }
  return client
}

export { ApiError }
