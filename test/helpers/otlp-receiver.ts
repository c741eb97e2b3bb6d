// An OTLP/HTTP receiver for tests: a node:http server on 127.0.0.1, port 0, that keeps every JSON
// export it is sent (/v1/metrics, /v1/traces) with its headers, and reads sums, histograms and
// spans out of them.
import { createServer, type IncomingHttpHeaders } from 'node:http'
import type { AddressInfo } from 'node:net'
import { gunzipSync } from 'node:zlib'

interface AnyValue {
  stringValue?: string
  boolValue?: boolean
  intValue?: number | string
  doubleValue?: number
  arrayValue?: { values?: AnyValue[] }
}
interface KeyValue {
  key: string
  value: AnyValue
}
interface DataPoint {
  attributes?: KeyValue[]
  asInt?: number | string
  asDouble?: number
  count?: number | string
}
interface OtlpMetric {
  name: string
  unit?: string
  sum?: { dataPoints: DataPoint[] }
  histogram?: { dataPoints: DataPoint[] }
}
interface OtlpSpan {
  traceId: string
  spanId: string
  parentSpanId?: string
  name: string
  attributes?: KeyValue[]
}

export interface ReceivedSpan {
  traceId: string
  spanId: string
  /** '' for a root span. */
  parentSpanId: string
  name: string
  attributes: Record<string, unknown>
}

export interface Export {
  path: string
  headers: IncomingHttpHeaders
  body: Record<string, unknown>
}

function plain(value: AnyValue): unknown {
  if (value.stringValue !== undefined) return value.stringValue
  if (value.boolValue !== undefined) return value.boolValue
  if (value.intValue !== undefined) return Number(value.intValue)
  if (value.doubleValue !== undefined) return value.doubleValue
  if (value.arrayValue !== undefined) return (value.arrayValue.values ?? []).map(plain)
  return undefined
}

const attributesOf = (list: KeyValue[] | undefined): Record<string, unknown> =>
  Object.fromEntries((list ?? []).map((kv) => [kv.key, plain(kv.value)]))

export interface OtlpReceiver {
  /** `http://127.0.0.1:port`: the base URL a telemetry.otlp.endpoint names. */
  url: string
  exports: Export[]
  /** Every metric of every /v1/metrics export, in arrival order. */
  metrics(): OtlpMetric[]
  /**
   * A sum's value at the data point whose attributes include `attributes`, from the last export
   * that has one (cumulative: the last holds the total).
   */
  sum(name: string, attributes: Record<string, string>): number | undefined
  /** The histogram's count per data point, keyed by its attributes' values joined with spaces. */
  histogramCounts(name: string): Record<string, number>
  spans(): ReceivedSpan[]
  close(): Promise<void>
}

const matches = (point: DataPoint, attributes: Record<string, string>): boolean => {
  const have = attributesOf(point.attributes)
  return Object.entries(attributes).every(([k, v]) => have[k] === v)
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const exports: Export[] = []
  const server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (chunk: Buffer) => chunks.push(chunk))
    req.on('end', () => {
      let raw = Buffer.concat(chunks)
      if (req.headers['content-encoding'] === 'gzip') raw = gunzipSync(raw)
      if (req.headers['content-type']?.startsWith('application/json') !== true) {
        res.writeHead(415).end()
        return
      }
      exports.push({
        path: req.url ?? '',
        headers: req.headers,
        body: JSON.parse(raw.toString('utf8')) as Record<string, unknown>,
      })
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}')
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo

  function metrics(): OtlpMetric[] {
    const out: OtlpMetric[] = []
    for (const e of exports) {
      if (e.path !== '/v1/metrics') continue
      const resources = (e.body.resourceMetrics ?? []) as { scopeMetrics?: { metrics?: OtlpMetric[] }[] }[]
      for (const r of resources) for (const s of r.scopeMetrics ?? []) out.push(...(s.metrics ?? []))
    }
    return out
  }

  return {
    url: `http://127.0.0.1:${port}`,
    exports,
    metrics,
    sum(name, attributes) {
      let found: number | undefined
      for (const m of metrics()) {
        if (m.name !== name || m.sum === undefined) continue
        const point = m.sum.dataPoints.find((p) => matches(p, attributes))
        if (point !== undefined) found = Number(point.asInt ?? point.asDouble)
      }
      return found
    },
    histogramCounts(name) {
      const out: Record<string, number> = {}
      for (const m of metrics()) {
        if (m.name !== name || m.histogram === undefined) continue
        for (const p of m.histogram.dataPoints)
          out[Object.values(attributesOf(p.attributes)).map(String).join(' ')] = Number(p.count)
      }
      return out
    },
    spans() {
      const out: ReceivedSpan[] = []
      for (const e of exports) {
        if (e.path !== '/v1/traces') continue
        const resources = (e.body.resourceSpans ?? []) as { scopeSpans?: { spans?: OtlpSpan[] }[] }[]
        for (const r of resources)
          for (const s of r.scopeSpans ?? [])
            for (const span of s.spans ?? [])
              out.push({
                traceId: span.traceId,
                spanId: span.spanId,
                parentSpanId: span.parentSpanId ?? '',
                name: span.name,
                attributes: attributesOf(span.attributes),
              })
      }
      return out
    },
    close: () => new Promise((resolve) => server.close(() => resolve())),
  }
}
