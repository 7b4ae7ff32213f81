import { z } from 'zod'

/** ISO 8601 date-time in UTC with a literal Z, optional fractional seconds, calendar-valid. */
export const Timestamp = z.iso.datetime({ offset: false, local: false }).meta({
  id: 'Timestamp',
  description: 'ISO 8601 date-time in UTC with a literal Z suffix; calendar-valid.',
  examples: ['2026-01-31T09:30:00Z'],
})

/** YYYY-MM-DD, calendar-valid (leap years included). */
export const CalendarDate = z.iso.date().meta({ id: 'Date', description: 'YYYY-MM-DD, calendar-valid.', examples: ['2026-02-28'] })

export interface Clock {
  now(): Date
}

export const systemClock: Clock = { now: () => new Date() }

/** Service timestamps are rendered with millisecond precision and a literal Z. */
export function isoNow(clock: Clock): string {
  return clock.now().toISOString()
}
