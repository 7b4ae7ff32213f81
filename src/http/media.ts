import type { FastifyRequest } from 'fastify'
import { Problem } from '../domain/problems.ts'
import type { RouteDef } from './route.ts'

function mediaTypeOf(header: string | undefined): { type: string; charset?: string } | null {
  if (!header) return null
  const [type, ...params] = header.split(';').map((p) => p.trim().toLowerCase())
  const charset = params
    .find((p) => p.startsWith('charset='))
    ?.slice(8)
    .replace(/"/g, '')
  return type ? { type, ...(charset ? { charset } : {}) } : null
}

function hasBody(request: FastifyRequest): boolean {
  const len = request.headers['content-length']
  return (len !== undefined && len !== '0') || request.headers['transfer-encoding'] !== undefined
}

/**
 * 415 before any byte of the body is read: compressed bodies of any encoding, and bodies that are not of
 * the route's media type (application/json for PUT and POST, application/merge-patch+json for PATCH).
 */
export function checkMediaType(def: RouteDef, request: FastifyRequest): void {
  const encoding = request.headers['content-encoding']
  if (encoding !== undefined && encoding.toLowerCase() !== 'identity') {
    throw new Problem('unsupported_media_type', `Content-Encoding ${encoding} is not accepted; send an uncompressed body.`)
  }
  const media = mediaTypeOf(request.headers['content-type'])
  const expected = def.body?.mediaType ?? 'application/json'
  if (!def.body && !hasBody(request)) return
  if (def.body?.optional && !hasBody(request)) return
  if (!media || media.type !== expected) {
    throw new Problem('unsupported_media_type', `Send the body as ${expected}.`)
  }
  if (media.charset && media.charset !== 'utf-8' && media.charset !== 'utf8') {
    throw new Problem('unsupported_media_type', 'Only UTF-8 bodies are accepted.')
  }
}
