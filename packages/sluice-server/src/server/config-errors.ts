// How a config mistake is reported: the file and line of a path in the YAML document, the path as
// messages name it, and what to write instead of a spelled-out duration.

import { InvalidConfigError } from 'sluice'
import { closest } from 'sluice/internal'
import type { Document } from 'yaml'
import { isMap, isScalar, LineCounter, parseDocument, visit } from 'yaml'

/** A path into the config: `['tiers', 'pro', 'api', 'limit']`. */
export type Path = readonly (string | number)[]

/** Locates YAML nodes so every error can name its line. */
export class Locator {
  constructor(
    readonly file: string,
    private readonly doc: Document,
    private readonly lines: LineCounter,
  ) {}

  /** The line of the deepest key on `path` that exists (or of the list item, for an index). */
  line(path: Path): number {
    let node: unknown = this.doc.contents
    let offset = (node as { range?: [number, number, number] } | null)?.range?.[0] ?? 0
    for (const segment of path) {
      if (!isMap(node)) {
        const items = (node as { items?: unknown[] } | null)?.items
        const item = typeof segment === 'number' ? items?.[segment] : undefined
        if (item === undefined) break
        node = item
      } else {
        const pair = node.items.find((p) => isScalar(p.key) && String(p.key.value) === String(segment))
        if (pair === undefined) break
        const keyRange = (pair.key as { range?: [number, number, number] }).range
        const valueRange = (pair.value as { range?: [number, number, number] } | null)?.range
        offset = keyRange?.[0] ?? valueRange?.[0] ?? offset
        node = pair.value
        continue
      }
      offset = (node as { range?: [number, number, number] } | null)?.range?.[0] ?? offset
    }
    return this.lines.linePos(offset).line
  }

  /** The line of a node's first character. */
  lineAt(node: { range?: [number, number, number] | null | undefined }): number {
    return this.lines.linePos(node.range?.[0] ?? 0).line
  }

  error(path: Path, message: string, cause?: unknown): InvalidConfigError {
    const where = `${this.file}:${this.line(path)}`
    return new InvalidConfigError(`${where}: ${message}`, cause === undefined ? undefined : { cause })
  }
}

/** `tiers.pro.api.limit`: how messages name a path. */
export const dotted = (path: Path): string => path.map(String).join('.')

/** A YAML map as plain data: an object, not null, not a list. */
export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/**
 * Refuse the first key of the map at `at` that is not among `known`: `store.tls.cafile: unknown key;
 * did you mean 'ca'?`, or the known keys when none is near.
 */
export function refuseUnknownKeys(
  loc: Locator,
  at: Path,
  map: Readonly<Record<string, unknown>>,
  known: readonly string[],
): void {
  for (const key of Object.keys(map)) {
    if (known.includes(key)) continue
    const path = [...at, key]
    const meant = closest(key, [...known])
    const hint = meant === undefined ? `the keys are ${known.join(', ')}` : `did you mean '${meant}'?`
    throw loc.error(path, `${dotted(path)}: unknown key; ${hint}`)
  }
}

const LONG_UNITS: Record<string, string> = {
  millisecond: 'ms',
  milliseconds: 'ms',
  msec: 'ms',
  msecs: 'ms',
  second: 's',
  seconds: 's',
  sec: 's',
  secs: 's',
  minute: 'm',
  minutes: 'm',
  min: 'm',
  mins: 'm',
  hour: 'h',
  hours: 'h',
  hr: 'h',
  hrs: 'h',
  day: 'd',
  days: 'd',
}

/** `"10 minutes"` -> `10m`; undefined when the text does not look like a spelled-out duration. */
export function suggestDuration(value: unknown): string | undefined {
  if (typeof value !== 'string') return undefined
  const match = /^\s*(\d+(?:\.\d+)?)\s*([A-Za-z]+)\s*$/.exec(value)
  const unit = match === null ? undefined : LONG_UNITS[match[2]!.toLowerCase()]
  return unit === undefined ? undefined : `${match![1]}${unit}`
}

/** Aliases one config may expand (yaml's own default, stated here so the bound is ours). */
const MAX_ALIAS_COUNT = 100

/**
 * The document as plain values, after refusing what toJS would hide: a `__proto__` key (which toJS
 * silently drops) and an alias bomb (toJS throws a bare ReferenceError). Both name file and line.
 */
export function toPlain(loc: Locator, doc: Document): unknown {
  let proto: InvalidConfigError | undefined
  let firstAlias: number | undefined
  visit(doc, {
    Pair(_, pair) {
      if (isScalar(pair.key) && pair.key.value === '__proto__') {
        proto = new InvalidConfigError(
          `${loc.file}:${loc.lineAt(pair.key)}: "__proto__" cannot be a key; rename it (a name starts with a letter)`,
        )
        return visit.BREAK
      }
      return undefined
    },
    Alias(_, alias) {
      firstAlias ??= loc.lineAt(alias)
      return visit.SKIP
    },
  })
  if (proto !== undefined) throw proto
  try {
    return doc.toJS({ maxAliasCount: MAX_ALIAS_COUNT })
  } catch (error) {
    if (!(error instanceof ReferenceError)) throw error
    throw new InvalidConfigError(
      `${loc.file}:${firstAlias ?? 1}: the YAML aliases expand too far (over ${MAX_ALIAS_COUNT} nodes from aliases); write the values out instead`,
      { cause: error },
    )
  }
}

/**
 * Parse YAML text into a document and its Locator, keeping line numbers; a syntax error is an
 * `InvalidConfigError` naming file and line. Shared by the service config and the Envoy rules.
 */
export function parseYamlDocument(text: string, file: string): { doc: Document; loc: Locator } {
  const lines = new LineCounter()
  const doc = parseDocument(text, { lineCounter: lines, prettyErrors: false, uniqueKeys: true })
  const loc = new Locator(file, doc, lines)
  const yamlError = doc.errors[0]
  if (yamlError !== undefined) {
    const line = yamlError.linePos?.[0]?.line ?? lines.linePos(yamlError.pos[0]).line
    throw new InvalidConfigError(`${file}:${line}: not valid YAML: ${yamlError.message.split('\n')[0]}`)
  }
  return { doc, loc }
}
