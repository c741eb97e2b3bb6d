// Seeded option objects, valid and not, for every validator of the library's options, and the
// outcome of each (the resolved value, or the error's class, code and message) as one line of JSON.
// test/limiter/option-outcomes.test.ts compares every line with test/fixtures/option-outcomes.json.
import { resolveFailover } from '../../packages/sluice/src/failover/options.js'
import { httpSettings } from '../../packages/sluice/src/http/options.js'
import type { HttpLimiterOptions } from '../../packages/sluice/src/http/types.js'
import { resolvePolicy } from '../../packages/sluice/src/policy.js'
import { postgresStoreSettings } from '../../packages/sluice/src/stores/postgres/options.js'
import { redisStoreSettings } from '../../packages/sluice/src/stores/redis/options.js'
import { random } from '../helpers/differential.js'

/** The validators under test, by the name a case gives. Each takes the decoded input. */
const VALIDATORS = {
  policy: (input: unknown) => {
    const [name, policy] = input as [string, unknown]
    return resolvePolicy(name, policy)
  },
  failover: (input: unknown) => resolveFailover(input as never),
  http: (input: unknown) => httpSettings(input as HttpLimiterOptions),
  redis: (input: unknown) => redisStoreSettings(input as never),
  postgres: (input: unknown) => postgresStoreSettings(input as never),
} satisfies Record<string, (input: unknown) => unknown>

type Check = keyof typeof VALIDATORS

/** A class whose instances are options objects that are not plain (`received Options` in messages). */
class Options {
  constructor(own: Record<string, unknown>) {
    Object.assign(this, own)
  }
}

/** The function inputs hold: its name tells it apart from the defaults (`Date.now` is `now`). */
function given(): number {
  return 0
}

/**
 * JSON for any input or outcome. Plain objects and arrays stay as they are (with own `__proto__`
 * keys written as keys); every other value is an object tagged `$`, a key no input holds.
 */
export function encode(value: unknown): unknown {
  switch (typeof value) {
    case 'undefined':
      return { $: 'undefined' }
    case 'function':
      return { $: 'function', name: value.name }
    case 'bigint':
      return { $: 'bigint', value: String(value) }
    case 'symbol':
      return { $: 'symbol', description: value.description }
    case 'number':
      if (Object.is(value, -0)) return { $: '-0' }
      return Number.isFinite(value) ? value : { $: String(value) }
    case 'string':
    case 'boolean':
      return value
  }
  if (value === null || value === undefined) return null
  const own = (o: object) => Object.fromEntries(Object.keys(o).map((k) => [k, encode((o as never)[k])]))
  if (Array.isArray(value)) {
    const items = value.map(encode)
    const extra = Object.keys(value).filter((k) => !/^\d+$/.test(k))
    if (extra.length === 0) return items
    return { $: 'array', items, own: Object.fromEntries(extra.map((k) => [k, encode((value as never)[k])])) }
  }
  // By prototype, not instanceof: an object may inherit from a Date or a Number without being one.
  const proto = Object.getPrototypeOf(value)
  if (proto === Date.prototype) return { $: 'Date', time: (value as Date).getTime() }
  if (proto === Map.prototype) return { $: 'Map' }
  if (proto === Number.prototype) return { $: 'Number', value: (value as number).valueOf() }
  if (proto === Options.prototype) return { $: 'Options', own: own(value) }
  if (proto === null) return { $: 'bare', own: own(value) }
  if (proto !== Object.prototype) return { $: 'inherits', from: encode(proto), own: own(value) }
  return own(value)
}

/** An object with exactly these own keys, `__proto__` included as a plain key. */
function withOwn(target: object, entries: Record<string, unknown>): object {
  for (const key of Object.keys(entries))
    Object.defineProperty(target, key, {
      value: decode(entries[key]),
      enumerable: true,
      writable: true,
      configurable: true,
    })
  return target
}

/** The value `encode` wrote. */
export function decode(json: unknown): unknown {
  if (json === null || typeof json !== 'object') return json
  if (Array.isArray(json)) return json.map(decode)
  const tagged = json as { $?: string; [key: string]: unknown }
  switch (tagged.$) {
    case undefined:
      return withOwn({}, tagged)
    case 'undefined':
      return undefined
    case 'NaN':
      return Number.NaN
    case 'Infinity':
      return Number.POSITIVE_INFINITY
    case '-Infinity':
      return Number.NEGATIVE_INFINITY
    case '-0':
      return -0
    case 'function':
      return given
    case 'bigint':
      return BigInt(tagged.value as string)
    case 'symbol':
      return Symbol(tagged.description as string)
    case 'array':
      return withOwn((tagged.items as unknown[]).map(decode), tagged.own as Record<string, unknown>)
    case 'Date':
      return new Date(tagged.time as number)
    case 'Map':
      return new Map()
    case 'Number':
      return new Number(tagged.value)
    case 'Options':
      return withOwn(new Options({}), tagged.own as Record<string, unknown>)
    case 'bare':
      return withOwn(Object.create(null), tagged.own as Record<string, unknown>)
    case 'inherits':
      return withOwn(Object.create(decode(tagged.from) as object), tagged.own as Record<string, unknown>)
  }
  throw new Error(`unknown tag ${tagged.$}`)
}

/** What a validator made of one input: `{ value }` resolved, or the error thrown as `<class> <code>: <message>`. */
function outcome(check: Check, input: unknown): unknown {
  try {
    return { value: encode(VALIDATORS[check](input)) }
  } catch (error) {
    const e = error as Error & { code?: unknown }
    return `${e.constructor.name} ${String(e.code)}: ${e.message}`
  }
}

/** Values of every kind, for any key: wrong types, edges of numbers, strings of every shape. */
const ANY_VALUES: unknown[] = [
  undefined,
  null,
  Number.NaN,
  Number.POSITIVE_INFINITY,
  Number.NEGATIVE_INFINITY,
  0,
  -0,
  -1,
  1,
  1.5,
  0.1,
  2 ** 31 - 1,
  2 ** 31,
  2 ** 53 - 1,
  2 ** 53,
  2 ** 60,
  -(2 ** 60),
  1e300,
  5n,
  '',
  ' ',
  '1',
  '10s',
  '1.5m',
  '0s',
  '-5s',
  'abc',
  ' 10 s ',
  true,
  false,
  [],
  [1],
  {},
  { warn: given },
  given,
  new Date(0),
  new Map(),
  Object.create(null),
  new Options({}),
  new Number(5),
  Symbol('s'),
]

/** Values near what each key takes: the valid ones, their edges and their misspellings. */
const NEAR: Record<string, unknown[]> = {
  id: ['api-v2', 'a.b_c-1', 'a b', 'x'.repeat(64), 'x'.repeat(65), 'café'],
  algorithm: [
    'fixed-window',
    'sliding-window-log',
    'sliding-window-counter',
    'token-bucket',
    'gcra',
    'concurrency',
    'Token-Bucket',
    'leaky-bucket',
  ],
  limit: [2, 100, 1_000_000, 1_000_001, 2 ** 40, 2 ** 50],
  burst: [2, 100, 2 ** 40],
  maxKeys: [2, 100_000],
  window: [1, 1000, '100ms', '1h', '1d', '30d', '1e3ms', 2 ** 50, '100000000d'],
  timeout: [1, 30_000, '30s', '1h', 2 ** 50],
  syncEvery: [1, '100ms', '1s', '2m', '1d'],
  onStoreError: ['open', 'closed', 'memory', 'Open', 'fail'],
  mode: ['exact', 'hybrid', 'Hybrid'],
  scope: ['region', 'global', 'Global', 'world'],
  storeTimeout: [50, '50ms', '2s'],
  cooldown: [1000, '2s'],
  failures: [2, 100],
  maxInFlight: [2, 10_000],
  instances: [2, 64],
  logInterval: [1000, '1m'],
  logger: [{ warn: 1 }, { info: given }, { warn: given, info: given }],
  onStoreHealth: [{ call: given }],
  breaker: [{ failures: 3 }, { cooldown: '2s' }, { failures: 0 }, { cooldown: 'soon' }, { failures: '3' }],
  headers: ['legacy', 'draft', 'both', 'none', 'Both', 'draft-6', 'draft-7', 'draft-8', 'draft-9'],
  body: ['json', 'problem', 'html'],
  ipv6Prefix: [32, 48, 64, 127, 128, 129],
  missingIp: ['shared', 'reject', 'drop'],
  maxKeyLength: [31, 32, 256, 4096, 4097],
  shadow: ['true', 1],
  onError: ['fail', 'open', 'closed'],
  apiKeyHeader: ['x-api-key', 'X-Key-2', 'x_api_key', 'x'.repeat(64), 'x'.repeat(65)],
  proxyHeader: ['x-forwarded-for', 'forwarded', 'x-real-ip', 'X-Forwarded-For'],
  storeUnavailableStatus: [503, 429, 500, '503'],
  prefix: ['sluice', 'rl', 'a{b', 'b}', 'x'.repeat(64), 'x'.repeat(65)],
  clock: ['server', 'client', 'Server', 'local'],
  coalesce: ['false', 0],
  coalesceWrites: ['true', 1],
  slotSecret: [false, 'x'.repeat(15), 'x'.repeat(16), '🔑'.repeat(8), 'a shared secret, long enough'],
  scriptRetryMs: [100, 60_000, 60_001, '100'],
  table: ['sluice_limits', 'app.limits', 'Limits', '1table', 'a-b', 'x'.repeat(41), 'x'.repeat(42)],
  migrate: ['no', 0],
  preparedStatements: ['yes', 1],
  cleanupIntervalMs: [1, 60_000, 2 ** 31 - 2, '60000'],
  cleanupBatch: [2, 999, 100_000, 100_001],
}

/**
 * The options objects each case starts from: small ones and ones with every key set. Each key of a
 * base is set to the values near it; on a `sweep` base, to every value of ANY_VALUES as well.
 */
const BASES: { check: Check; name?: string; sweep?: true; options: Record<string, unknown> }[] = [
  {
    check: 'policy',
    name: 'api',
    sweep: true,
    options: { algorithm: 'token-bucket', limit: 10, window: '1s', burst: 20 },
  },
  {
    check: 'policy',
    name: 'api',
    options: { algorithm: 'sliding-window-counter', limit: 100, window: '1m' },
  },
  {
    check: 'policy',
    name: 'envoy:edge /v1',
    options: {
      id: 'api-v2',
      algorithm: 'fixed-window',
      limit: 100,
      window: 60_000,
      onStoreError: 'closed',
      mode: 'hybrid',
      syncEvery: '1s',
      scope: 'region',
      maxKeys: 1000,
    },
  },
  {
    check: 'policy',
    name: 'jobs',
    sweep: true,
    options: { algorithm: 'concurrency', limit: 5, timeout: '30s' },
  },
  {
    check: 'policy',
    name: 'jobs',
    options: {
      id: 'jobs.v1',
      algorithm: 'concurrency',
      limit: 5,
      timeout: 30_000,
      onStoreError: 'memory',
      scope: 'region',
      maxKeys: 10,
    },
  },
  { check: 'failover', sweep: true, options: {} },
  {
    check: 'failover',
    options: {
      policies: {},
      onStoreError: 'closed',
      storeTimeout: '50ms',
      breaker: { failures: 3, cooldown: '2s' },
      maxInFlight: 10,
      instances: 2,
      logger: { warn: given },
      logInterval: '1m',
      onStoreHealth: given,
    },
  },
  { check: 'http', sweep: true, options: { rules: [] } },
  {
    check: 'http',
    options: {
      rules: [],
      headers: 'draft',
      body: 'problem',
      ipv6Prefix: 56,
      missingIp: 'reject',
      maxKeyLength: 512,
      shadow: true,
      onError: 'open',
      apiKeyHeader: 'x-key',
      proxyHeader: 'forwarded',
      storeUnavailableStatus: 429,
    },
  },
  { check: 'redis', sweep: true, options: {} },
  {
    check: 'redis',
    options: {
      prefix: 'rl',
      clock: 'client',
      now: given,
      coalesce: false,
      coalesceWrites: false,
      slotSecret: 'a shared secret, long enough',
      scriptRetryMs: 50,
    },
  },
  { check: 'postgres', sweep: true, options: {} },
  {
    check: 'postgres',
    options: {
      table: 'app.limits',
      clock: 'client',
      now: given,
      migrate: false,
      cleanupIntervalMs: 0,
      cleanupBatch: 10,
      preparedStatements: false,
    },
  },
]

/** Keys each validator knows, for values and misspellings: the failover's nested breaker as `breaker.x`. */
const KEYS: Record<Check, string[]> = {
  policy: ['id', 'algorithm', 'limit', 'window', 'timeout', 'burst', 'onStoreError', 'mode', 'syncEvery'],
  failover: [
    'onStoreError',
    'storeTimeout',
    'breaker',
    'breaker.failures',
    'breaker.cooldown',
    'maxInFlight',
    'instances',
    'logger',
    'logInterval',
    'onStoreHealth',
  ],
  http: [
    'headers',
    'body',
    'ipv6Prefix',
    'missingIp',
    'maxKeyLength',
    'shadow',
    'onError',
    'apiKeyHeader',
    'proxyHeader',
    'storeUnavailableStatus',
  ],
  redis: ['prefix', 'clock', 'now', 'coalesce', 'coalesceWrites', 'slotSecret', 'scriptRetryMs'],
  postgres: ['table', 'clock', 'now', 'migrate', 'cleanupIntervalMs', 'cleanupBatch', 'preparedStatements'],
}
KEYS.policy.push('scope', 'maxKeys')

/** Keys no validator knows but an object may hold anyway. */
const STRANGE_KEYS = ['__proto__', 'constructor', 'toString', 'hasOwnProperty', 'valueOf', 'extra', '']

type Options_ = Record<string, unknown>

/** `options` with `path` (`key` or `outer.key`) set to `value`; the original is left as it was. */
function setAt(options: Options_, path: string, value: unknown): Options_ {
  const copy = { ...options }
  const [outer, inner] = path.split('.') as [string, string | undefined]
  if (inner === undefined) {
    Object.defineProperty(copy, outer, { value, enumerable: true, writable: true, configurable: true })
    return copy
  }
  const nested = copy[outer]
  copy[outer] = { ...(nested !== null && typeof nested === 'object' ? nested : {}), [inner]: value }
  return copy
}

function without(options: Options_, key: string): Options_ {
  const copy = { ...options }
  delete copy[key]
  return copy
}

/** A misspelling of `key`: two letters swapped, one dropped or doubled, or its case changed. */
function misspell(key: string, next: () => number): string {
  const at = Math.floor(next() * key.length)
  switch (Math.floor(next() * 4)) {
    case 0:
      return at + 1 < key.length ? key.slice(0, at) + key[at + 1] + key[at] + key.slice(at + 2) : `${key}s`
    case 1:
      return key.slice(0, at) + key.slice(at + 1)
    case 2:
      return key.slice(0, at) + key[at] + key.slice(at)
    default:
      return key.toLowerCase() === key ? key.toUpperCase() : key.toLowerCase()
  }
}

const pick = <T>(list: readonly T[], next: () => number): T => list[Math.floor(next() * list.length)]!

/** One random change to `options`: a value set, a key removed, added, misspelled or inherited. */
function mutate(check: Check, options: Options_, next: () => number): Options_ {
  const key = pick(KEYS[check], next)
  const near = NEAR[key.split('.').pop()!] ?? []
  switch (Math.floor(next() * 7)) {
    case 0:
    case 1:
      return setAt(options, key, pick(near.length > 0 && next() < 0.6 ? near : ANY_VALUES, next))
    case 2:
      return without(options, pick(Object.keys(options), next) ?? key)
    case 3:
      return setAt(options, misspell(key.split('.').pop()!, next), pick([...near, ...ANY_VALUES], next))
    case 4:
      return setAt(options, pick(STRANGE_KEYS, next), pick(ANY_VALUES, next))
    case 5: {
      // The key held by the prototype rather than by the object itself.
      const inherited = pick(Object.keys(options), next)
      if (inherited === undefined) return options
      const proto = { [inherited]: options[inherited] }
      return Object.assign(Object.create(proto), without(options, inherited))
    }
    default:
      return setAt(options, key, pick(near.length > 0 ? near : ANY_VALUES, next))
  }
}

/** The inputs of every case: each key of each base set to every value, then seeded random changes. */
function inputs(): { check: Check; input: unknown }[] {
  const cases: { check: Check; input: unknown }[] = []
  const add = (base: (typeof BASES)[number], options: unknown) =>
    cases.push({ check: base.check, input: base.check === 'policy' ? [base.name, options] : options })
  // Whole inputs that are not options objects at all.
  for (const base of BASES.filter((b, i) => BASES.findIndex((c) => c.check === b.check) === i))
    for (const value of ANY_VALUES) add(base, value)
  for (const base of BASES) {
    add(base, base.options)
    for (const key of KEYS[base.check]) {
      for (const value of [...(NEAR[key.split('.').pop()!] ?? []), ...(base.sweep ? ANY_VALUES : [])])
        add(base, setAt(base.options, key, value))
      if (key in base.options) add(base, without(base.options, key))
    }
  }
  // The base's keys held otherwise: by a class instance, a null-prototype object, an array; unknown
  // keys inherited, alone, two, or beside a bad value of the first key.
  for (const base of BASES) {
    const first = KEYS[base.check][0]!
    const inheriting = (proto: object, own: Options_) => Object.assign(Object.create(proto), own)
    for (const options of [
      Object.assign(new Options({}), base.options),
      Object.assign(Object.create(null), base.options),
      Object.assign([], base.options),
      inheriting({ extra: 1 }, base.options),
      inheriting({ extra: 1, other: 'x' }, base.options),
      inheriting({ extra: 1 }, setAt(base.options, first, Number.NaN)),
      inheriting({ window: '1s', timeout: '1s', now: 1 }, base.options),
    ])
      add(base, options)
  }
  const next = random(25)
  for (let i = 0; i < 600; i++) {
    const base = pick(BASES, next)
    let options = base.options
    const changes = 1 + Math.floor(next() * 3)
    for (let c = 0; c < changes; c++) options = mutate(base.check, options, next)
    add(base, options)
  }
  for (const name of ['api', '', 'a b', 'x'.repeat(65), 'envoy:edge /v1', 'tab\there', 'ü'.repeat(256)])
    for (const options of [BASES[0]!.options, BASES[2]!.options])
      cases.push({ check: 'policy', input: [name, options] })
  // `penalty`: each of its keys set to the values near it and to every value, removed, misspelled;
  // the penalty itself as every value; beside blockDuration, hybrid mode and a concurrency policy.
  const penalised = { ...BASES[1]!.options, penalty: { after: 3, within: '1m', block: '5m' } }
  const penaltyNear: Record<string, unknown[]> = {
    after: [1, 3, 1.5, 0, -1, '3', 1_000_000, 1_000_001],
    within: ['1m', 1, '0s', 'soon', 2 ** 60],
    block: ['5m', '1ms', 0, '1 minute', '1M'],
    factor: [1, 1.5, 2, 0.5, 0, '2', 1.000001, 1e9],
    max: ['1h', '5m', '4m', '100y', 0],
  }
  const penaltyCase = (options: unknown) => cases.push({ check: 'policy', input: ['login', options] })
  for (const value of ANY_VALUES) penaltyCase({ ...penalised, penalty: value })
  for (const [key, near] of Object.entries(penaltyNear)) {
    for (const value of [...near, ...ANY_VALUES]) penaltyCase(setAt(penalised, `penalty.${key}`, value))
    penaltyCase({ ...penalised, penalty: without(penalised.penalty, key) })
    penaltyCase(setAt(penalised, `penalty.${misspell(key, next)}`, 1))
  }
  penaltyCase({ ...penalised, blockDuration: '1m' })
  penaltyCase({ ...penalised, mode: 'hybrid' })
  penaltyCase({ ...BASES[3]!.options, penalty: penalised.penalty })
  return cases
}

/** Every case as one line of JSON, `[validator, input, outcome]`, each line once. */
export function outcomeLines(): string[] {
  const lines = inputs().map(({ check, input }) =>
    JSON.stringify([check, encode(input), outcome(check, input)]),
  )
  return [...new Set(lines)]
}

/** The cases of lines written by `outcomeLines`, with their inputs decoded, to run again. */
export function replay(line: string): { recorded: string; rerun: string } {
  const [check, input] = JSON.parse(line) as [Check, unknown]
  const decoded = decode(input)
  return { recorded: line, rerun: JSON.stringify([check, encode(decoded), outcome(check, decoded)]) }
}
