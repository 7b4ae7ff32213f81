import type { z } from 'zod'
import { type FieldError, Problem } from '../domain/problems.ts'

/** RFC 6901 pointer from a Zod issue path, under an optional prefix (`/path`, `/query`, '' for the body). */
export function toPointer(path: readonly PropertyKey[], prefix = ''): string {
  return prefix + path.map((p) => `/${String(p).replace(/~/g, '~0').replace(/\//g, '~1')}`).join('')
}

/**
 * Zod 4 issues map straight into `errors[]`: `code` is the issue code, except where the service declares
 * its own field code (`sensitive_external_id`, `unknown_reference`, ...) through `params.fieldCode`.
 * An `unrecognized_keys` issue becomes one error per key, pointing at the key itself.
 */
export function issuesToErrors(issues: readonly z.core.$ZodIssue[], prefix = ''): FieldError[] {
  const out: FieldError[] = []
  for (const issue of issues) {
    if (issue.code === 'unrecognized_keys') {
      for (const key of issue.keys) {
        out.push({ code: 'unrecognized_keys', detail: `Unrecognized key "${key}"`, pointer: toPointer([...issue.path, key], prefix) })
      }
      continue
    }
    const fieldCode = issue.code === 'custom' ? (issue.params as { fieldCode?: string } | undefined)?.fieldCode : undefined
    out.push({ code: fieldCode ?? issue.code, detail: issue.message, pointer: toPointer(issue.path, prefix) })
  }
  return out
}

export function validationProblem(errors: FieldError[], what: string): Problem {
  const first = errors[0]
  const detail = first
    ? `${what} is invalid: ${first.pointer || '/'} ${first.detail}${errors.length > 1 ? ` (and ${errors.length - 1} more)` : ''}`
    : `${what} is invalid`
  return new Problem('validation_error', detail, { errors })
}

/** Parse or throw a 422 naming every problem found. */
export function parseOrThrow<S extends z.ZodType>(schema: S, value: unknown, prefix: string, what: string): z.output<S> {
  const res = schema.safeParse(value)
  if (!res.success) throw validationProblem(issuesToErrors(res.error.issues, prefix), what)
  return res.data
}
