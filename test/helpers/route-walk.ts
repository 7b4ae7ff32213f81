import type { RouteDef } from '../../src/http/route.ts'

/**
 * Helpers for suites that walk the app's route table (`createApp().routes`), so that a route added to the
 * table is covered without anyone remembering to add it to a test.
 */

export const routeKey = (r: Pick<RouteDef, 'method' | 'path'>) => `${r.method} ${r.path}`

/** The `:name` parameters of a route path, in order. */
export function pathParams(path: string): string[] {
  return [...path.matchAll(/:([A-Za-z]+)/g)].map((m) => m[1] as string)
}

/** The path segment just before a parameter (`customers` for `/customers/:externalCustomerId`). */
export function segmentBefore(path: string, param: string): string {
  const parts = path.split('/')
  const i = parts.indexOf(`:${param}`)
  return i > 0 ? (parts[i - 1] as string) : ''
}

/** The concrete URL of a route with the given parameter values (each must be given). */
export function fillPath(path: string, values: Record<string, string>): string {
  return path.replace(/:([A-Za-z]+)/g, (_, name: string) => {
    const v = values[name]
    if (v === undefined) throw new Error(`no value for :${name} of ${path}`)
    return encodeURIComponent(v)
  })
}
