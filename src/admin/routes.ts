import { ListQuery } from '../http/common-schemas.ts'
import { buildOpenApi } from '../http/openapi.ts'
import { defineRoute, type RouteDef } from '../http/route.ts'
import type { Store } from '../store/store.ts'
import {
  ApiKeyCreate,
  ApiKeyCreated,
  ApiKeyList,
  ApiKeyParams,
  ApiKeyRotate,
  ApiKeyRotated,
  ApiKeyView,
  AuditList,
  AuditQuery,
  ClientCodeParams,
  ClientList,
  ClientPut,
  ClientView,
  EmptyBody,
  GrantList,
  GrantParams,
  GrantPut,
  GrantView,
  IntegrationList,
  IntegrationParams,
  IntegrationPut,
  IntegrationView,
  OperatorOpenApiDocument,
  SandboxResetView,
} from './schema.ts'
import type { AdminService } from './service.ts'

const admin = { kind: 'admin' } as const
const json = 'application/json' as const

/**
 * The operator API (docs/operator-api.md), under /admin/v1, every route behind the operator token. None is
 * `public`: the v1 document leaves them out, and /admin/v1/openapi.json publishes exactly these.
 */
export function adminRoutes(
  svc: AdminService,
  store: Store,
  doc: { serverUrl: string; docsUrl: string },
  /** Operator routes other families define (the sandbox's payment `simulate`): documented here too. */
  more: readonly RouteDef[] = [],
): RouteDef[] {
  let document: Record<string, unknown> | undefined
  const routes: RouteDef[] = [
    defineRoute({
      method: 'GET',
      path: '/admin/v1/openapi.json',
      operationId: 'adminGetOpenApi',
      summary: 'The OpenAPI 3.1 document of the operator API',
      tags: ['Operator'],
      auth: admin,
      responses: { 200: { schema: OperatorOpenApiDocument, description: 'OpenAPI 3.1 of exactly the /admin/v1 routes' } },
      problems: [],
      public: false,
      handler: async () => {
        document ??= buildOpenApi(routes, { ...doc, audience: 'operator' })
        return { status: 200, body: document }
      },
    }),
    ...clientRoutes(svc),
    ...integrationRoutes(svc),
    ...apiKeyRoutes(svc),
    ...grantRoutes(svc),
    ...auditRoutes(svc, store),
    ...more,
  ]
  return routes
}

/**
 * Sandbox-only operator routes of the admin family: absent in production (404 route_not_found there), as the
 * payment `simulate` route is. Passed to adminRoutes with the other families' sandbox routes.
 */
export function adminSandboxRoutes(svc: AdminService, opts: { sandbox: boolean }): RouteDef[] {
  if (!opts.sandbox) return []
  return [
    defineRoute({
      method: 'POST',
      path: '/admin/v1/clients/:clientCode/sandbox-reset',
      operationId: 'adminResetSandboxClient',
      summary: 'Delete every resource, feed event and batch of a sandbox client (keeping its credentials and grants)',
      description:
        "Sandbox only. Deletes the client's Customers, Receivables, events, observations, declarations, snapshots, recovery instructions, Payment requests and Payments, reconciliations, batches, change-feed events, webhook deliveries, Source activity and sandbox clock (back to real time), in one transaction. Keeps the client, its grants (so every API key still works), its webhook endpoints, its payment provider, its feed head (a cursor from before the reset answers 410 `cursor_expired`; new events continue the sequence) and the audit trail. Audited as `client.sandbox_reset` with the rows deleted per table.",
      tags: ['Operator'],
      auth: admin,
      params: ClientCodeParams,
      body: { schema: EmptyBody, mediaType: json, optional: true },
      responses: { 200: { schema: SandboxResetView, description: 'Reset; the rows deleted per table' } },
      problems: ['client_not_found'],
      public: false,
      handler: async ({ params }) => ({ status: 200, body: await svc.resetClient(params.clientCode) }),
    }),
  ]
}

/** Clients: list, read, create or change, and the grants a client has. */
function clientRoutes(svc: AdminService): RouteDef[] {
  return [
    defineRoute({
      method: 'GET',
      path: '/admin/v1/clients',
      operationId: 'adminListClients',
      summary: 'List clients',
      description: 'By client code; `?cursor=&limit=` pages (limit 1..200, default 50).',
      tags: ['Operator'],
      auth: admin,
      query: ListQuery,
      responses: { 200: { schema: ClientList, description: 'A page of clients, by client code' } },
      problems: [],
      public: false,
      handler: async ({ query }) => ({ status: 200, body: await svc.listClients(query) }),
    }),
    defineRoute({
      method: 'GET',
      path: '/admin/v1/clients/:clientCode',
      operationId: 'adminGetClient',
      summary: 'Read a client',
      tags: ['Operator'],
      auth: admin,
      params: ClientCodeParams,
      responses: { 200: { schema: ClientView, description: 'The client' } },
      problems: ['client_not_found'],
      public: false,
      handler: async ({ params }) => ({ status: 200, body: await svc.getClient(params.clientCode) }),
    }),
    defineRoute({
      method: 'PUT',
      path: '/admin/v1/clients/:clientCode',
      operationId: 'adminPutClient',
      summary: 'Create or update a client',
      tags: ['Operator'],
      auth: admin,
      params: ClientCodeParams,
      body: { schema: ClientPut, mediaType: json },
      responses: { 201: { schema: ClientView, description: 'Created' }, 200: { schema: ClientView, description: 'Updated' } },
      problems: [],
      public: false,
      handler: async ({ params, body }) => svc.putClient(params.clientCode, body),
    }),
    defineRoute({
      method: 'GET',
      path: '/admin/v1/clients/:clientCode/grants',
      operationId: 'adminListClientGrants',
      summary: "List a client's grants (which integrations may act for it)",
      description: 'By integration id, revoked grants included; `?cursor=&limit=` pages (limit 1..200, default 50).',
      tags: ['Operator'],
      auth: admin,
      params: ClientCodeParams,
      query: ListQuery,
      responses: { 200: { schema: GrantList, description: 'A page of grants, by integration id' } },
      problems: ['client_not_found'],
      public: false,
      handler: async ({ params, query }) => ({ status: 200, body: await svc.listGrantsOfClient(params.clientCode, query) }),
    }),
  ]
}

/** Integrations: list, read, create or change. */
function integrationRoutes(svc: AdminService): RouteDef[] {
  return [
    defineRoute({
      method: 'GET',
      path: '/admin/v1/integrations',
      operationId: 'adminListIntegrations',
      summary: 'List integrations',
      description: 'By integration id; `?cursor=&limit=` pages (limit 1..200, default 50).',
      tags: ['Operator'],
      auth: admin,
      query: ListQuery,
      responses: { 200: { schema: IntegrationList, description: 'A page of integrations, by integration id' } },
      problems: [],
      public: false,
      handler: async ({ query }) => ({ status: 200, body: await svc.listIntegrations(query) }),
    }),
    defineRoute({
      method: 'GET',
      path: '/admin/v1/integrations/:integrationId',
      operationId: 'adminGetIntegration',
      summary: 'Read an integration',
      tags: ['Operator'],
      auth: admin,
      params: IntegrationParams,
      responses: { 200: { schema: IntegrationView, description: 'The integration' } },
      problems: ['integration_not_found'],
      public: false,
      handler: async ({ params }) => ({ status: 200, body: await svc.getIntegration(params.integrationId) }),
    }),
    defineRoute({
      method: 'PUT',
      path: '/admin/v1/integrations/:integrationId',
      operationId: 'adminPutIntegration',
      summary: 'Create or update an integration',
      tags: ['Operator'],
      auth: admin,
      params: IntegrationParams,
      body: { schema: IntegrationPut, mediaType: json },
      responses: {
        201: { schema: IntegrationView, description: 'Created' },
        200: { schema: IntegrationView, description: 'Updated' },
      },
      problems: [],
      public: false,
      handler: async ({ params, body }) => svc.putIntegration(params.integrationId, body),
    }),
  ]
}

/** An integration's API keys: list, issue, rotate, read, revoke. */
function apiKeyRoutes(svc: AdminService): RouteDef[] {
  return [
    defineRoute({
      method: 'GET',
      path: '/admin/v1/integrations/:integrationId/api-keys',
      operationId: 'adminListApiKeys',
      summary: "List an integration's API keys (never the keys themselves)",
      description:
        'Oldest first, revoked keys included; `?cursor=&limit=` pages (limit 1..200, default 50). Only a digest of each key is stored: a key is shown once, when issued, and never again; `hint` shows its last 4 characters.',
      tags: ['Operator'],
      auth: admin,
      params: IntegrationParams,
      query: ListQuery,
      responses: { 200: { schema: ApiKeyList, description: 'A page of API keys, oldest first' } },
      problems: ['integration_not_found'],
      public: false,
      handler: async ({ params, query }) => ({ status: 200, body: await svc.listApiKeys(params.integrationId, query) }),
    }),
    defineRoute({
      method: 'POST',
      path: '/admin/v1/integrations/:integrationId/api-keys',
      operationId: 'adminCreateApiKey',
      summary: 'Issue an API key (shown once)',
      description:
        'Issues a key for the integration, with an optional `name` (default `Unnamed key`) and `expiresAt` (in the future; from then on the key is refused like a revoked one). The key is in this answer only: the service keeps its SHA-256 digest. Audited as `api_key.created`, without the key.',
      tags: ['Operator'],
      auth: admin,
      params: IntegrationParams,
      body: { schema: ApiKeyCreate, mediaType: json, optional: true },
      responses: { 201: { schema: ApiKeyCreated, description: 'The key, shown this once' } },
      problems: ['integration_not_found'],
      public: false,
      handler: async ({ params, body }) => ({ status: 201, body: await svc.createApiKey(params.integrationId, body ?? {}) }),
    }),
    defineRoute({
      method: 'POST',
      path: '/admin/v1/api-keys/:apiKeyId/rotate',
      operationId: 'adminRotateApiKey',
      summary: 'Rotate an API key: a new key now, the old one ending after a grace period',
      description:
        "Issues a new key for the same integration (shown once, named like the old one unless `name` is given) and brings the old key's `expiresAt` forward to now plus `gracePeriodSeconds` (0 to 30 days; 0 ends it at once), in one transaction, so the Source can switch keys with no gap. A revoked or expired key cannot be rotated (409 `api_key_inactive`). Audited as `api_key.created` (the new key) and `api_key.rotated` (the old one), without either key.",
      tags: ['Operator'],
      auth: admin,
      params: ApiKeyParams,
      body: { schema: ApiKeyRotate, mediaType: json },
      responses: { 201: { schema: ApiKeyRotated, description: 'The new key, shown this once, and the old key as it now is' } },
      problems: ['api_key_not_found', 'api_key_inactive'],
      public: false,
      handler: async ({ params, body }) => ({ status: 201, body: await svc.rotateApiKey(params.apiKeyId, body) }),
    }),
    defineRoute({
      method: 'GET',
      path: '/admin/v1/api-keys/:apiKeyId',
      operationId: 'adminGetApiKey',
      summary: 'Read an API key (never the key itself)',
      tags: ['Operator'],
      auth: admin,
      params: ApiKeyParams,
      responses: { 200: { schema: ApiKeyView, description: 'The API key, without the key' } },
      problems: ['api_key_not_found'],
      public: false,
      handler: async ({ params }) => ({ status: 200, body: await svc.getApiKey(params.apiKeyId) }),
    }),
    defineRoute({
      method: 'POST',
      path: '/admin/v1/api-keys/:apiKeyId/revoke',
      operationId: 'adminRevokeApiKey',
      summary: 'Revoke an API key',
      tags: ['Operator'],
      auth: admin,
      params: ApiKeyParams,
      body: { schema: EmptyBody, mediaType: json, optional: true },
      responses: { 200: { schema: ApiKeyView, description: 'Revoked (idempotent)' } },
      problems: ['api_key_not_found'],
      public: false,
      handler: async ({ params }) => ({ status: 200, body: await svc.revokeApiKey(params.apiKeyId) }),
    }),
  ]
}

/** An integration's grants: list, read, put, revoke. */
function grantRoutes(svc: AdminService): RouteDef[] {
  return [
    defineRoute({
      method: 'GET',
      path: '/admin/v1/integrations/:integrationId/grants',
      operationId: 'adminListIntegrationGrants',
      summary: "List an integration's grants (which clients it may act for)",
      description: 'By client code, revoked grants included; `?cursor=&limit=` pages (limit 1..200, default 50).',
      tags: ['Operator'],
      auth: admin,
      params: IntegrationParams,
      query: ListQuery,
      responses: { 200: { schema: GrantList, description: 'A page of grants, by client code' } },
      problems: ['integration_not_found'],
      public: false,
      handler: async ({ params, query }) => ({ status: 200, body: await svc.listGrantsOfIntegration(params.integrationId, query) }),
    }),
    defineRoute({
      method: 'GET',
      path: '/admin/v1/integrations/:integrationId/grants/:clientCode',
      operationId: 'adminGetGrant',
      summary: 'Read a grant',
      tags: ['Operator'],
      auth: admin,
      params: GrantParams,
      responses: { 200: { schema: GrantView, description: 'The grant' } },
      problems: ['grant_not_found'],
      public: false,
      handler: async ({ params }) => ({ status: 200, body: await svc.getGrant(params.integrationId, params.clientCode) }),
    }),
    defineRoute({
      method: 'PUT',
      path: '/admin/v1/integrations/:integrationId/grants/:clientCode',
      operationId: 'adminPutGrant',
      summary: 'Grant an integration access to a client (re-activates a revoked grant)',
      tags: ['Operator'],
      auth: admin,
      params: GrantParams,
      body: { schema: GrantPut, mediaType: json },
      responses: { 201: { schema: GrantView, description: 'Created' }, 200: { schema: GrantView, description: 'Replaced' } },
      problems: ['integration_not_found', 'client_not_found'],
      public: false,
      handler: async ({ params, body }) => svc.putGrant(params.integrationId, params.clientCode, body),
    }),
    defineRoute({
      method: 'POST',
      path: '/admin/v1/integrations/:integrationId/grants/:clientCode/revoke',
      operationId: 'adminRevokeGrant',
      summary: 'Revoke a grant',
      tags: ['Operator'],
      auth: admin,
      params: GrantParams,
      body: { schema: EmptyBody, mediaType: json, optional: true },
      responses: { 200: { schema: GrantView, description: 'Revoked (idempotent)' } },
      problems: ['grant_not_found'],
      public: false,
      handler: async ({ params }) => ({ status: 200, body: await svc.revokeGrant(params.integrationId, params.clientCode) }),
    }),
  ]
}

/** The audit trail of operator and service actions. */
function auditRoutes(svc: AdminService, store: Store): RouteDef[] {
  return [
    defineRoute({
      method: 'GET',
      path: '/admin/v1/audit-events',
      operationId: 'adminListAuditEvents',
      summary: 'List audit events (never containing keys or secrets)',
      tags: ['Operator'],
      auth: admin,
      query: AuditQuery,
      responses: { 200: { schema: AuditList, description: 'A page of audit events, oldest first' } },
      problems: [],
      public: false,
      handler: async ({ query }) => ({ status: 200, body: await svc.listAudit(store, query) }),
    }),
  ]
}
