import { ClientCodeParams, EmptyBody } from '../admin/schema.ts'
import { defineRoute, type RouteDef } from '../http/route.ts'
import { SandboxClockAdvance, SandboxClockView } from './schema.ts'
import type { SandboxClockService } from './service.ts'

const admin = { kind: 'admin' } as const
const path = '/admin/v1/clients/:clientCode/sandbox-clock'

/**
 * The operator's sandbox clock routes (docs/operator-api.md). Sandbox only: in production they do not exist
 * and answer 404 route_not_found, as the payment `simulate` route does.
 */
export function sandboxClockRoutes(svc: SandboxClockService | undefined): RouteDef[] {
  if (!svc) return []
  return [
    defineRoute({
      method: 'GET',
      path,
      operationId: 'adminGetSandboxClock',
      summary: "Read a client's sandbox clock",
      description: 'Sandbox only. `mode` `real_time` (the default) or `frozen`, and the time every time rule of the client reads.',
      tags: ['Operator'],
      auth: admin,
      params: ClientCodeParams,
      responses: { 200: { schema: SandboxClockView, description: 'The clock' } },
      problems: ['client_not_found'],
      public: false,
      handler: async ({ params }) => ({ status: 200, body: await svc.get(params.clientCode) }),
    }),
    defineRoute({
      method: 'POST',
      path: `${path}/advance`,
      operationId: 'adminAdvanceSandboxClock',
      summary: "Advance a client's sandbox clock by a duration or to an instant",
      description:
        "Sandbox only. Stops the client's clock at the new time (it stays there until advanced again or reset) and applies the client's time rules at once: Source freshness and `source_stale` (with new Receivable revisions and feed events), Payment request expiry, change-feed retention, webhook retries falling due. Never backwards: a `to` before the clock's time is 409 `sandbox_clock_backwards`. Audited as `sandbox_clock.advanced`.",
      tags: ['Operator'],
      auth: admin,
      params: ClientCodeParams,
      body: { schema: SandboxClockAdvance, mediaType: 'application/json' },
      responses: { 200: { schema: SandboxClockView, description: 'The clock after the move, its rules applied' } },
      problems: ['client_not_found', 'sandbox_clock_backwards'],
      public: false,
      handler: async ({ params, body }) => ({ status: 200, body: await svc.advance(params.clientCode, body) }),
    }),
    defineRoute({
      method: 'POST',
      path: `${path}/reset`,
      operationId: 'adminResetSandboxClock',
      summary: "Put a client's sandbox clock back on real time",
      description:
        'Sandbox only. Idempotent. Times already recorded stay as they were (they may lie ahead of real time). Audited as `sandbox_clock.reset` when the clock was stopped.',
      tags: ['Operator'],
      auth: admin,
      params: ClientCodeParams,
      body: { schema: EmptyBody, mediaType: 'application/json', optional: true },
      responses: { 200: { schema: SandboxClockView, description: 'The clock, on real time' } },
      problems: ['client_not_found'],
      public: false,
      handler: async ({ params }) => ({ status: 200, body: await svc.reset(params.clientCode) }),
    }),
  ]
}
