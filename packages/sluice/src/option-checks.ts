// Small validators of option values, composed into the shape of each options object: what the
// library validates at construction without a schema library. Each validator names the first problem
// it finds. A validator given no message of its own names what was expected and what was given
// (`Invalid input: expected string, received number`). test/fixtures/option-outcomes.json holds the
// outcome of every options validator built on these for a large seeded set of inputs.
import { isOptionsObject } from './options.js'

/** Why a value does not fit: where (the keys down to it) and what is wrong, or the keys not known. */
export interface Problem {
  readonly path: readonly string[]
  readonly message: string
  /** Set when the problem is keys the shape does not have (inherited ones: own keys are checked first). */
  readonly unknownKeys?: readonly string[]
}

/** One value's validator: undefined when it fits. */
export type Validator = (value: unknown) => Problem | undefined

/** The validators of an options object's keys, run in this order: the first problem is the one reported. */
export type Shape = Readonly<Record<string, Validator>>

const problem = (message: string): Problem => ({ path: [], message })

/** How a value is named in the generic messages: `NaN`, `Infinity`, `null`, `array`, a class name, a typeof. */
function kindOf(value: unknown): string {
  if (typeof value === 'number')
    return Number.isNaN(value) ? 'NaN' : Number.isFinite(value) ? 'number' : String(value)
  if (value === null) return 'null'
  if (Array.isArray(value)) return 'array'
  if (
    typeof value === 'object' &&
    Object.getPrototypeOf(value) !== Object.prototype &&
    'constructor' in value
  ) {
    const made = (value as { constructor: unknown }).constructor
    if (made) return String((made as { name?: unknown }).name)
  }
  return typeof value
}

/** `Invalid input: expected string, received number`: the message of a value of the wrong type. */
const wrongType = (expected: string, value: unknown) =>
  `Invalid input: expected ${expected}, received ${kindOf(value)}`

const isFiniteNumber = (value: unknown): value is number =>
  typeof value === 'number' && Number.isFinite(value)

/** `undefined` fits (the caller applies the default); any other value goes to `validate`. */
export const optional =
  (validate: Validator): Validator =>
  (value) =>
    value === undefined ? undefined : validate(value)

/** A validator from a test and the message when it fails. */
export const must =
  (fits: (value: unknown) => boolean, message: string): Validator =>
  (value) =>
    fits(value) ? undefined : problem(message)

/** One of `values`; the message defaults to listing them. */
export function oneOf(values: readonly (string | number)[], message?: string): Validator {
  const listed = values.map((v) => (typeof v === 'string' ? `"${v}"` : String(v))).join('|')
  return must(
    (value) => values.includes(value as string),
    message ?? `Invalid option: expected one of ${listed}`,
  )
}

/** `true` or `false`. */
export const boolean =
  (message?: string): Validator =>
  (value) =>
    typeof value === 'boolean' ? undefined : problem(message ?? wrongType('boolean', value))

/** A positive safe integer, as a count is: `<what> must be a number`, `... a positive whole number`. */
export const count =
  (what: string): Validator =>
  (value) => {
    if (!isFiniteNumber(value)) return problem(`${what} must be a number`)
    return Number.isSafeInteger(value) && value > 0
      ? undefined
      : problem(`${what} must be a positive whole number`)
  }

/** A duration as written (a finite number or a string); `parseDuration` reads it afterwards. */
export const duration = (message: string): Validator =>
  must((value) => isFiniteNumber(value) || typeof value === 'string', message)

/** A string matching `pattern`. Each message defaults to a generic one. */
export const text =
  (pattern: RegExp, messages: { notText?: string; mismatch?: string } = {}): Validator =>
  (value) => {
    if (typeof value !== 'string') return problem(messages.notText ?? wrongType('string', value))
    return pattern.test(value)
      ? undefined
      : problem(messages.mismatch ?? `Invalid string: must match pattern ${pattern}`)
  }

/** A whole number from `min` to `max`; `message` for every failure, or a generic one for each. */
export const wholeNumber =
  (min: number, max: number, message?: string): Validator =>
  (value) => {
    const fail = (generic: string) => problem(message ?? generic)
    if (!isFiniteNumber(value)) return fail(wrongType('number', value))
    if (!Number.isInteger(value)) return fail(wrongType('int', value))
    if (value > Number.MAX_SAFE_INTEGER)
      return fail(`Too big: expected int to be <=${Number.MAX_SAFE_INTEGER}`)
    if (value < Number.MIN_SAFE_INTEGER)
      return fail(`Too small: expected int to be >=${Number.MIN_SAFE_INTEGER}`)
    if (value < min) return fail(`Too small: expected number to be >=${min}`)
    if (value > max) return fail(`Too big: expected number to be <=${max}`)
    return undefined
  }

/**
 * An options object: each key of `shape` checked in order (own or inherited, as `value[key]` reads
 * it); with `strict`, then any other enumerable key, inherited ones included, is a problem.
 */
export const object =
  (shape: Shape, strict = false): Validator =>
  (value) => {
    if (!isOptionsObject(value)) return problem(wrongType('object', value))
    for (const key of Object.keys(shape)) {
      const found = shape[key]!((value as Record<string, unknown>)[key])
      if (found !== undefined) return { ...found, path: [key, ...found.path] }
    }
    if (!strict) return undefined
    const unknownKeys: string[] = []
    for (const key in value) if (!Object.hasOwn(shape, key)) unknownKeys.push(key)
    if (unknownKeys.length === 0) return undefined
    const listed = unknownKeys.map((key) => `"${key}"`).join(', ')
    return {
      path: [],
      message: `Unrecognized key${unknownKeys.length > 1 ? 's' : ''}: ${listed}`,
      unknownKeys,
    }
  }
