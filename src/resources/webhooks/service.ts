import type { KeyRing } from '../../domain/key-ring.ts'
import type { Clock } from '../../domain/time.ts'
import type { Resolver } from '../../outbound/destination.ts'
import type { Store } from '../../store/store.ts'
import { createDeliveryLogService } from './delivery-log-service.ts'
import { createEndpointService } from './endpoint-service.ts'
import { createReplayService } from './replay-service.ts'

/**
 * The webhook endpoint's API, one service per audience (issue 34 item 2): the endpoint's configuration
 * (endpoint-service.ts: PUT, rotate-secret, disable, GET, the grant-revoked hook), the delivery log
 * (delivery-log-service.ts: the list, a retry, a ping) and replays (replay-service.ts). This factory assembles them
 * under the one name the routes and the app use.
 */

export { REPLAY_CHUNK_SIZE } from './replay-service.ts'
export { openSecret, ROTATION_OVERLAP_MS, readableTypes, secretAad } from './secrets.ts'

export interface WebhookServiceDeps {
  store: Store
  clock: Clock
  resolver: Resolver
  allowLoopback: boolean
  /** The key ring that encrypts signing secrets at rest (src/store/secret-keys.ts). */
  keyRing: () => Promise<KeyRing>
  /** Pending notifications per endpoint past which it lags (WEBHOOK_BACKLOG_LIMIT). */
  backlogLimit?: number
  /** Told after a commit that queued a delivery due now (a retry, a ping): the dispatcher takes a turn soon. */
  onQueued?: () => void
}

/** WEBHOOK_BACKLOG_LIMIT's default. */
export const DEFAULT_BACKLOG_LIMIT = 10_000

export function createWebhookService(deps: WebhookServiceDeps) {
  const backlogLimit = deps.backlogLimit ?? DEFAULT_BACKLOG_LIMIT
  const endpoint = createEndpointService(deps)
  const log = createDeliveryLogService({ store: deps.store, clock: deps.clock, backlogLimit, onQueued: deps.onQueued })
  const replays = createReplayService({ store: deps.store, clock: deps.clock })
  return {
    operations: { ...endpoint.operations, ...log.operations },
    get: endpoint.get,
    backlogLimit,
    deliveries: log.deliveries,
    replay: replays.replay,
    onGrantRevoked: endpoint.onGrantRevoked,
    keyRing: deps.keyRing,
  }
}

export type WebhookService = ReturnType<typeof createWebhookService>
