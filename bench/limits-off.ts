/**
 * The service with its limits switched off, for `npm run bench` only: the same app on the same store as
 * src/main.ts, but its gate only looks the API key up (one statement) and admits every request, with no count
 * and no slot. Measured beside the real service in the same run, it shows what the limits cost. Never a way
 * to run the service: there is no configuration that turns the limits off.
 */

import { digestSecret } from '../src/access/keys.ts'
import { lookupKey } from '../src/access/store.ts'
import { createApp } from '../src/app.ts'
import { loadConfig } from '../src/config.ts'
import { callerOfGateRow, type Gate, type GatedRead, type GateRequest } from '../src/http/limits.ts'
import { type GateRow, gatedReadSql, splitGatedRows } from '../src/store/gate-store.ts'
import { openStore } from '../src/store/open.ts'

const config = loadConfig()
const store = await openStore({ databaseUrl: config.databaseUrl, dataDir: config.dataDir })
const unlimited = { allowed: true, limit: config.limits.perMinute, remaining: config.limits.perMinute, resetSeconds: 60 }
const admittedLease = { release: async () => {} }
const gate: Gate = {
  async enter(req) {
    const caller = await lookupKey(store, req.digest, req.environment, req.clientCode, new Date())
    if (!caller) return { caller: null }
    return { caller, rate: unlimited, refused: null, lease: admittedLease }
  },
  // Like for like with the real gate on PostgreSQL, whose one-read GETs run the gate in their read: the key
  // lookup in the read's statement, in the gate's columns, with nothing counted and no slot.
  ...(store.kind === 'postgres'
    ? {
        async enterWithRead<T extends object>(req: GateRequest, read: GatedRead) {
          const p = read.params.length
          const lookup =
            'SELECT k.api_key_id AS key_id, k.integration_id AS key_integration_id, g.status AS grant_status, ' +
            'g.scopes AS grant_scopes, g.ip_allowlist AS grant_ip_allowlist, g.recovery_entry_mode AS grant_recovery_entry_mode, ' +
            'g.feed_mode AS grant_feed_mode, g.industry_profile AS grant_industry_profile, ' +
            'g.receipt_delivery_owner AS grant_receipt_delivery_owner, 0 AS used, true AS admitted ' +
            `FROM api_keys k LEFT JOIN grants g ON g.client_code = $${p + 2} AND g.integration_id = k.integration_id ` +
            `WHERE k.digest = $${p + 1} AND k.revoked_at IS NULL AND (k.expires_at IS NULL OR k.expires_at > now()) AND k.environment = $${p + 3}`
          const rows = await store.query<Record<string, unknown>>(
            gatedReadSql(lookup, read.sql, p + 4),
            [...read.params, req.digest, req.clientCode, req.environment, read.scopes],
            { prepared: true },
          )
          const { gate: row, read: readRows } = splitGatedRows<GateRow, T>(rows)
          if (!row) return { outcome: { caller: null }, rows: [] }
          const caller = callerOfGateRow(req.clientCode, row)
          return { outcome: { caller, rate: unlimited, refused: null, lease: admittedLease }, rows: readRows }
        },
      }
    : {}),
}
const app = createApp({ store, config, adminTokenDigest: digestSecret(config.adminToken ?? ''), gate })
await app.app.listen({ host: config.host, port: config.port })
const stop = async () => {
  await app.app.close()
  await store.close()
  process.exit(0)
}
process.once('SIGTERM', () => void stop())
process.once('SIGINT', () => void stop())
