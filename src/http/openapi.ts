import { z } from 'zod'
import { type ProblemCode, problemCatalogue } from '../domain/problems.ts'
import { withGuideLink } from './guide.ts'
import { crossCuttingProblems, type RouteDef } from './route.ts'

export const ProblemSchema = z
  .object({
    type: z.string().describe('{docs_url}/problems/<code>'),
    title: z.string(),
    status: z.number().int(),
    detail: z.string(),
    requestId: z.string().uuid(),
    errors: z
      .array(z.object({ code: z.string(), detail: z.string(), pointer: z.string() }))
      .optional()
      .describe('On 422: one entry per invalid field; `pointer` is a JSON pointer (route parameters under /path, query under /query).'),
  })
  .meta({ id: 'Problem' })

type Json = Record<string, unknown>

const refOf = (schema: z.ZodType): string | undefined => {
  const id = (z.globalRegistry.get(schema) as { id?: string } | undefined)?.id
  return id
}

function stripIds(s: Json): Json {
  const { $id: _id, $schema: _schema, ...rest } = s
  return rest
}

/** Parameters are small: inlined, without references (an empty metadata registry hides the ids). */
function inline(schema: z.ZodType): Json {
  return stripIds(z.toJSONSchema(schema, { io: 'input', metadata: z.registry(), unrepresentable: 'any' }) as Json)
}

function parameters(def: RouteDef): Json[] {
  const out: Json[] = []
  for (const [where, schema] of [
    ['path', def.params],
    ['query', def.query],
  ] as const) {
    if (!schema) continue
    const js = inline(schema) as { properties?: Record<string, Json>; required?: string[] }
    const shape = (schema as unknown as { shape?: Record<string, z.ZodType> }).shape ?? {}
    for (const [name, prop] of Object.entries(js.properties ?? {})) {
      // A parameter's `.describe()` (kept in the global registry, which `inline` leaves out) is its description.
      const member = shape[name]
      const description = member ? z.globalRegistry.get(member)?.description : undefined
      out.push({
        name,
        in: where,
        required: where === 'path' || (js.required ?? []).includes(name),
        ...(description ? { description } : {}),
        schema: prop,
      })
    }
  }
  return out
}

function schemaRef(schema: z.ZodType, name: string): Json {
  const id = refOf(schema)
  if (!id) throw new Error(`${name}: request and response schemas must carry .meta({ id }) to be published`)
  return { $ref: `#/components/schemas/${id}` }
}

/** Collects every component reachable from `start` ($ref-walk), so the document names only what it uses. */
function reachable(start: unknown, all: Record<string, Json>): Record<string, Json> {
  const out: Record<string, Json> = {}
  const visit = (node: unknown) => {
    if (Array.isArray(node)) return node.forEach(visit)
    if (!node || typeof node !== 'object') return
    for (const [k, v] of Object.entries(node)) {
      if (k === '$ref' && typeof v === 'string' && v.startsWith('#/components/schemas/')) {
        const id = v.slice('#/components/schemas/'.length)
        if (!out[id] && all[id]) {
          out[id] = all[id]
          visit(all[id])
        }
      } else visit(v)
    }
  }
  visit(start)
  return out
}

/**
 * Zod drops `examples` from a schema that transforms (such as Money, which normalizes the amount) when it
 * renders the input side, since they might show the output. Ours are request bodies the service accepts
 * as is (test/api/examples.test.ts), so they are put back.
 */
function restoreExamples(ctx: { zodSchema: unknown; jsonSchema: Json }): void {
  const examples = z.globalRegistry.get(ctx.zodSchema as z.ZodType)?.examples
  if (examples !== undefined && !('examples' in ctx.jsonSchema)) ctx.jsonSchema.examples = examples
}

/**
 * Which document: `public` is the v1 contract for integrators (routes marked `public`); `operator` is the
 * operator API (every route behind the operator token), served at /admin/v1/openapi.json.
 */
export type OpenApiAudience = 'public' | 'operator'

const AUDIENCES = {
  public: {
    select: (r: RouteDef) => r.public,
    info: {
      title: 'Inbound Receivables Service',
      version: '1.0.0',
      description:
        "Receivables ingestion from a creditor's accounting Source. Every route is scoped by a client code. Errors are application/problem+json.",
    },
    securitySchemes: { apiKey: { type: 'http', scheme: 'bearer', description: 'An API key irk_<environment>_<random>' } },
  },
  operator: {
    select: (r: RouteDef) => r.auth.kind === 'admin',
    info: {
      title: 'Inbound Receivables Service: operator API',
      version: '1.0.0',
      description:
        'Clients, integrations, grants and API keys, and the audit trail of every change to them, for the people who run the service. Every route needs the operator token (ADMIN_TOKEN). API keys are shown once, when issued; reads never show a key or its digest. Errors are application/problem+json.',
    },
    securitySchemes: {
      operatorToken: { type: 'http', scheme: 'bearer', description: 'The operator token: ADMIN_TOKEN, or the one printed at first start' },
    },
  },
} as const

function security(def: RouteDef): Json {
  if (def.auth.kind === 'api_key') return { security: [{ apiKey: [] }], 'x-required-scopes': def.auth.scopes }
  if (def.auth.kind === 'admin') return { security: [{ operatorToken: [] }] }
  return { security: [] }
}

export function buildOpenApi(
  routes: RouteDef[],
  opts: { serverUrl: string; docsUrl: string; audience?: OpenApiAudience | undefined },
): Json {
  const audience = AUDIENCES[opts.audience ?? 'public']
  const paths: Record<string, Record<string, Json>> = {}
  for (const def of routes.filter(audience.select)) {
    const path = def.path.replace(/:([A-Za-z]+)/g, '{$1}')
    const responses: Json = {}
    for (const [status, r] of Object.entries(def.responses)) {
      responses[status] = r.schema
        ? { description: r.description, content: { 'application/json': { schema: schemaRef(r.schema, def.operationId) } } }
        : { description: r.description }
    }
    const codes = [...new Set<ProblemCode>([...crossCuttingProblems(def), ...def.problems])]
    const byStatus = new Map<number, ProblemCode[]>()
    for (const code of codes) {
      const status = problemCatalogue[code].status
      byStatus.set(status, [...(byStatus.get(status) ?? []), code])
    }
    for (const [status, list] of [...byStatus].sort(([a], [b]) => a - b)) {
      responses[String(status)] = {
        description: list.map((c) => `\`${c}\`: ${problemCatalogue[c].title}`).join('; '),
        ...(status === 429 ? { headers: { 'Retry-After': { schema: { type: 'integer' }, description: 'Seconds to wait' } } } : {}),
        content: {
          'application/problem+json': {
            schema: { $ref: '#/components/schemas/Problem' },
            examples: Object.fromEntries(
              list.map((c) => [c, { value: { type: `${opts.docsUrl}/problems/${c}`, title: problemCatalogue[c].title, status } }]),
            ),
          },
        },
      }
    }
    // Public operations link to their concept page of the guide (by tag); operator ones have no guide page.
    const description = (opts.audience ?? 'public') === 'public' ? withGuideLink(def.description, def.tags) : def.description
    const operation: Json = {
      operationId: def.operationId,
      summary: def.summary,
      ...(description ? { description } : {}),
      tags: def.tags,
      parameters: parameters(def),
      responses,
      ...security(def),
    }
    if (def.body) {
      operation.requestBody = {
        required: !def.body.optional,
        content: { [def.body.mediaType]: { schema: schemaRef(def.body.schema, def.operationId) } },
      }
    }
    paths[path] = { ...paths[path], [def.method.toLowerCase()]: operation }
  }
  const all = (
    z.toJSONSchema(z.globalRegistry, {
      io: 'input',
      unrepresentable: 'any',
      uri: (id) => `#/components/schemas/${id}`,
      override: restoreExamples,
    }) as {
      schemas: Record<string, Json>
    }
  ).schemas
  const components = Object.fromEntries(
    Object.entries(reachable({ paths, p: { $ref: '#/components/schemas/Problem' } }, all)).map(([k, v]) => [k, stripIds(v)]),
  )
  return {
    openapi: '3.1.0',
    info: { ...audience.info },
    servers: [{ url: opts.serverUrl }],
    paths,
    components: {
      schemas: Object.fromEntries(Object.entries(components).sort(([a], [b]) => (a < b ? -1 : 1))),
      securitySchemes: { ...audience.securitySchemes },
    },
  }
}
