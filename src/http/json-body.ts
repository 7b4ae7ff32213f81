import sjson from 'secure-json-parse'
import { type FieldError, Problem } from '../domain/problems.ts'
import { toPointer, validationProblem } from './validation.ts'

/**
 * Text the store can keep. PostgreSQL (and PGlite) refuse U+0000 in `text` and `jsonb`, and JSON escapes can
 * spell an unpaired UTF-16 surrogate (`"\ud800"`) that no UTF-8 encoding can hold; either used to reach the
 * store and fail there as a 503. Every request body is checked here, where it is parsed, so no route can
 * forget it: the answer is 422 `validation_error`, one `errors[]` entry per offending string, `invalid_format`
 * for a value and `invalid_key` for a member name, with the RFC 6901 pointer of the value or member.
 *
 * The walk is iterative: a 256 KiB body can nest far deeper than the call stack allows.
 */

// Without the `u` flag a regular expression sees UTF-16 code units, which is what a lone surrogate is.
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/

/** At most this many entries in `errors[]`: the walk stops there (a 256 KiB body can hold thousands). */
const MAX_ERRORS = 20

export function isStorableText(s: string): boolean {
  return !s.includes('\u0000') && !LONE_SURROGATE.test(s)
}

// Worded like the other field details, which follow their pointer: "/name/firstName contains U+0000 ...".
const VALUE_DETAIL = 'contains U+0000 or an unpaired UTF-16 surrogate, which cannot be stored'
const KEY_DETAIL = 'is a member name containing U+0000 or an unpaired UTF-16 surrogate, which cannot be stored'

interface Visit {
  value: unknown
  key: string
  parent: Visit | null
}

/** The path of a visited value, built only when it is reported (copying it at every level would be quadratic). */
function pathOf(visit: Visit): string[] {
  const path: string[] = []
  for (let v: Visit | null = visit; v?.parent; v = v.parent) path.push(v.key)
  return path.reverse()
}

/**
 * Every string (member names included) in a parsed JSON value that cannot be stored, as field errors: depth
 * first in document order, an object's member names before the values under them.
 */
export function unstorableStrings(value: unknown, prefix = ''): FieldError[] {
  const errors: FieldError[] = []
  const stack: Visit[] = [{ value, key: '', parent: null }]
  while (stack.length > 0 && errors.length < MAX_ERRORS) {
    const visit = stack.pop() as Visit
    const v = visit.value
    if (typeof v === 'string') {
      if (!isStorableText(v)) errors.push({ code: 'invalid_format', detail: VALUE_DETAIL, pointer: toPointer(pathOf(visit), prefix) })
    } else if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) stack.push({ value: v[i], key: String(i), parent: visit })
    } else if (v !== null && typeof v === 'object') {
      const keys = Object.keys(v)
      for (const key of keys) {
        if (!isStorableText(key))
          errors.push({ code: 'invalid_key', detail: KEY_DETAIL, pointer: toPointer([...pathOf(visit), key], prefix) })
      }
      for (let i = keys.length - 1; i >= 0; i--) {
        const key = keys[i] as string
        stack.push({ value: (v as Record<string, unknown>)[key], key, parent: visit })
      }
    }
  }
  return errors.slice(0, MAX_ERRORS)
}

/**
 * The one JSON body parser: 400 `malformed_json` for text that is not JSON (or smuggles `__proto__` /
 * `constructor.prototype`), 422 `validation_error` for JSON holding text the store cannot keep.
 */
export function parseJsonBody(text: string): unknown {
  let value: unknown
  try {
    value = sjson.parse(text, { protoAction: 'error', constructorAction: 'error' })
  } catch {
    throw new Problem('malformed_json', 'The request body is not valid JSON.')
  }
  const errors = unstorableStrings(value)
  if (errors.length > 0) throw validationProblem(errors, 'The request body')
  return value
}

/** The same rule for route parameters and query strings (`%00` decodes to U+0000). */
export function assertStorableParameters(values: unknown, prefix: '/path' | '/query', what: string): void {
  const errors = unstorableStrings(values, prefix)
  if (errors.length > 0) throw validationProblem(errors, what)
}
