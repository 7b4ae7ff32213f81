import type { Queryable, Tx } from '../store/store.ts'

/** SQL of the sandbox clock (migration 0014). A client without a row runs on real time. */

export interface ClockRow {
  client_code: string
  frozen_at: string
  updated_at: string
}

/** The instant the client's clock is stopped at, or null (real time). One primary-key lookup. */
export async function readClock(db: Queryable, clientCode: string): Promise<Date | null> {
  const rows = await db.query<{ frozen_at: string }>('SELECT frozen_at FROM sandbox_clocks WHERE client_code = $1', [clientCode])
  return rows[0] ? new Date(rows[0].frozen_at) : null
}

export async function findClock(db: Queryable, clientCode: string, forUpdate = false): Promise<ClockRow | undefined> {
  return (await db.query<ClockRow>(`SELECT * FROM sandbox_clocks WHERE client_code = $1${forUpdate ? ' FOR UPDATE' : ''}`, [clientCode]))[0]
}

/** Every stopped clock: the workers' per-client passes (a sandbox has a handful; production none). */
export async function listClocks(db: Queryable): Promise<Map<string, Date>> {
  const rows = await db.query<{ client_code: string; frozen_at: string }>('SELECT client_code, frozen_at FROM sandbox_clocks')
  return new Map(rows.map((r) => [r.client_code, new Date(r.frozen_at)]))
}

export async function writeClock(tx: Tx, clientCode: string, frozenAt: string, now: string): Promise<ClockRow> {
  const rows = await tx.query<ClockRow>(
    `INSERT INTO sandbox_clocks (client_code, frozen_at, updated_at) VALUES ($1, $2, $3)
     ON CONFLICT (client_code) DO UPDATE SET frozen_at = $2, updated_at = $3
     RETURNING *`,
    [clientCode, frozenAt, now],
  )
  return rows[0] as ClockRow
}

export async function deleteClock(tx: Tx, clientCode: string): Promise<boolean> {
  return (await tx.query('DELETE FROM sandbox_clocks WHERE client_code = $1 RETURNING client_code', [clientCode])).length > 0
}
