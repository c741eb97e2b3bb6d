// Strict options: every options object is checked once, at construction, for keys it does not know,
// so a misspelling (`stroe`, `storeTimout`) is an error with a "did you mean" instead of a default.
import { InvalidOptionsError, type SluiceError } from './errors.js'

/**
 * Every key of an options type, as a list the compiler keeps complete: `keysOf<T>({ a: true, b: true })`
 * fails to compile when a key of `T` is missing or one is extra, so adding an option to an interface
 * without adding it to its known keys is a type error, not a runtime rejection.
 */
export function keysOf<T>(keys: { readonly [K in keyof Required<T>]: true }): readonly string[] {
  return Object.freeze(Object.keys(keys))
}

/**
 * Edit distance where swapping two neighbouring letters counts as one edit (`stroe` -> `store` is 1),
 * compared without case (`trustproxy` -> `trustProxy` is 0).
 */
function distance(a: string, b: string): number {
  const s = a.toLowerCase()
  const t = b.toLowerCase()
  // Three rows of the optimal-string-alignment table: two back (for swaps), one back, current.
  let before = new Array<number>(t.length + 1).fill(0)
  let previous = Array.from({ length: t.length + 1 }, (_, j) => j)
  for (let i = 1; i <= s.length; i++) {
    const current = [i]
    for (let j = 1; j <= t.length; j++) {
      const cost = s[i - 1] === t[j - 1] ? 0 : 1
      let d = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + cost)
      if (i > 1 && j > 1 && s[i - 1] === t[j - 2] && s[i - 2] === t[j - 1])
        d = Math.min(d, before[j - 2]! + 1)
      current.push(d)
    }
    before = previous
    previous = current
  }
  return previous[t.length]!
}

/**
 * The candidate closest to `word`, when it is close enough to be a misspelling of it (at most 2
 * edits, and at most a third of the longer word's letters); undefined otherwise.
 * @example closest('stroe', ['store', 'policies']) // 'store'
 */
export function closest(word: string, candidates: Iterable<string>): string | undefined {
  let best: string | undefined
  let bestDistance = Number.POSITIVE_INFINITY
  for (const candidate of candidates) {
    const d = distance(word, candidate)
    const allowed = Math.min(2, Math.max(1, Math.floor(Math.max(word.length, candidate.length) / 3)))
    if (d <= allowed && d < bestDistance) {
      best = candidate
      bestDistance = d
    }
  }
  return best
}

/** `unknown option 'stroe'; did you mean 'store'?`, or the known options when none is close. */
export function unknownOptionMessage(key: string, allowed: readonly string[]): string {
  const suggestion = closest(key, allowed)
  return suggestion === undefined
    ? `unknown option '${key}'; known options: ${allowed.join(', ')}`
    : `unknown option '${key}'; did you mean '${suggestion}'?`
}

/**
 * Throw when `value` holds a key that is not in `allowed`: `InvalidOptionsError` (or what `error`
 * makes) with the message `<where>: unknown option '<key>'; did you mean '<closest>'?`. Call it once,
 * where the options are validated, never per decision.
 */
export function checkKnownKeys(
  where: string,
  value: object,
  allowed: readonly string[],
  error: (message: string) => SluiceError = (message) => new InvalidOptionsError(message),
): void {
  for (const key of Object.keys(value)) {
    if (!allowed.includes(key)) throw error(`${where}: ${unknownOptionMessage(key, allowed)}`)
  }
}

/** True for a plain options object: not null, not an array, not a function. */
export function isOptionsObject(value: unknown): value is object {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}
