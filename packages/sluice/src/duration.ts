// Durations in config: integer milliseconds, or strings like `250ms`, `10s`, `5m`, `1h`, `1d`.
import { InvalidDurationError } from './errors.js'

/** A duration: integer milliseconds or a string such as `'500ms'`, `'10s'`, `'1.5m'`, `'1h'`, `'1d'`. */
export type Duration = number | `${number}${'ms' | 's' | 'm' | 'h' | 'd'}` | (string & {})

const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }
const PATTERN = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)\s*$/

/**
 * Parse a duration into whole milliseconds (> 0).
 * @example parseDuration('1m') // 60000
 */
export function parseDuration(value: unknown, what = 'duration'): number {
  if (typeof value === 'number') {
    if (Number.isSafeInteger(value) && value > 0) return value
    throw new InvalidDurationError(
      `${what}: ${String(value)} is not a duration; use a positive whole number of milliseconds or a string like '10s'`,
    )
  }
  if (typeof value === 'string') {
    const match = PATTERN.exec(value)
    if (match) {
      const ms = Number(match[1]) * UNIT_MS[match[2]!]!
      if (Number.isSafeInteger(ms) && ms > 0) return ms
    }
    throw new InvalidDurationError(
      `${what}: ${JSON.stringify(value)} is not a duration; use a number with a unit: 500ms, 10s, 10m, 1h, 1d`,
    )
  }
  throw new InvalidDurationError(
    `${what}: expected a duration (milliseconds or a string like '10s'), got ${value === null ? 'null' : typeof value}`,
  )
}
