import { z } from 'zod'
import { Timestamp } from '../domain/time.ts'

/**
 * ISO 8601 duration in weeks, days, hours, minutes and seconds (`P30D`, `PT1H30M`, `P1W2DT0.5S`): no years or
 * months, whose length depends on the date they start from. Zero (`PT0S`) is allowed: it stops the clock where
 * it is.
 */
export const DURATION_PATTERN =
  /^P(?!$)(?:(\d{1,6})W)?(?:(\d{1,7})D)?(?:T(?=\d)(?:(\d{1,8})H)?(?:(\d{1,10})M)?(?:(\d{1,12}(?:\.\d{1,3})?)S)?)?$/

export const Duration = z
  .string()
  .regex(DURATION_PATTERN, 'must be an ISO 8601 duration of weeks, days, hours, minutes and seconds, such as P30D or PT1H30M')
  .meta({ id: 'OperatorDuration', examples: ['P30D', 'PT1H30M', 'P1W'] })

/** Milliseconds of a duration that matched DURATION_PATTERN. */
export function durationMs(text: string): number {
  const m = DURATION_PATTERN.exec(text)
  if (!m) throw new RangeError(`not a duration: ${text}`)
  const n = (i: number) => Number(m[i] ?? 0)
  return Math.round((((n(1) * 7 + n(2)) * 24 + n(3)) * 60 + n(4)) * 60_000 + n(5) * 1000)
}

const AT = '2026-01-31T09:30:00.000Z'

export const SandboxClockView = z
  .object({
    clientCode: z.string(),
    mode: z
      .enum(['real_time', 'frozen'])
      .describe('`real_time`: the client runs on the real clock. `frozen`: its clock stands at `now` until advanced or reset.'),
    now: Timestamp.describe("The client's time: what every time rule of this client reads."),
    updatedAt: Timestamp.nullable().describe('When (real time) the clock was last advanced; null on real time.'),
  })
  .meta({
    id: 'OperatorSandboxClock',
    examples: [{ clientCode: 'acme-cu', mode: 'frozen', now: '2026-03-02T09:30:00.000Z', updatedAt: AT }],
  })
export type SandboxClockView = z.infer<typeof SandboxClockView>

export const SandboxClockAdvance = z
  .strictObject({
    by: Duration.optional().describe("Advance by this duration from the clock's time now. Give `by` or `to`, not both."),
    to: Timestamp.optional().describe("Advance to this instant: at or after the clock's time now. Give `by` or `to`, not both."),
  })
  .meta({ id: 'OperatorSandboxClockAdvance', examples: [{ by: 'P30D' }, { to: '2026-03-02T09:30:00Z' }] })
export type SandboxClockAdvance = z.infer<typeof SandboxClockAdvance>
