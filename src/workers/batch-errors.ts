import { CommitOutcomeUnknownError } from '../store/store.ts'

/**
 * SQLSTATE classes and codes that say "the store could not do it now", not "this record is wrong": connection
 * exceptions (08), transaction rollback (40: serialization failure 40001, deadlock 40P01), insufficient
 * resources (53), operator intervention (57: statement canceled, backend terminated, server shutting down),
 * system errors (58: I/O), and a lock wait that timed out (55P03).
 */
const TRANSIENT_CLASSES = new Set(['08', '40', '53', '57', '58'])
const TRANSIENT_CODES = new Set(['55P03'])
/** Socket errors and the `pg` driver's words for a connection that broke or never came. */
const NETWORK_CODES = new Set(['ECONNRESET', 'ECONNREFUSED', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN'])
const LOST_CONNECTION =
  /Connection terminated|connection (?:is )?(?:closed|ended|lost)|timeout exceeded when trying to connect|Client has encountered a connection error|not queryable/i

/**
 * True when an error came from the store being unable to run the work at this moment (a retry of the same
 * work may succeed), as opposed to an error of the work itself. Such an error never becomes a record's
 * outcome: the chunk is rolled back and retried.
 */
export function isTransientStoreError(err: unknown): boolean {
  if (err instanceof CommitOutcomeUnknownError) return true
  if (typeof err !== 'object' || err === null) return false
  const { code, message } = err as { code?: unknown; message?: unknown }
  if (typeof code === 'string') {
    if (/^[0-9A-Z]{5}$/.test(code)) return TRANSIENT_CLASSES.has(code.slice(0, 2)) || TRANSIENT_CODES.has(code)
    if (NETWORK_CODES.has(code)) return true
  }
  return typeof message === 'string' && LOST_CONNECTION.test(message)
}

/** What `last_error` keeps of a chunk failure: the SQLSTATE (or error name) and message, never the error's detail. */
export function describeError(err: unknown): string {
  const e = (typeof err === 'object' && err !== null ? err : { message: String(err) }) as {
    code?: unknown
    name?: unknown
    message?: unknown
  }
  const label = typeof e.code === 'string' ? e.code : typeof e.name === 'string' ? e.name : 'Error'
  return `${label}: ${String(e.message ?? '')}`.slice(0, 500)
}

/** What an integrator is told about the failure, without the message (it may name store internals). */
export function errorClass(err: string): string {
  const label = err.slice(0, err.indexOf(':'))
  return /^[0-9A-Z]{5}$/.test(label) ? `SQLSTATE ${label}` : label || 'an unexpected error'
}
