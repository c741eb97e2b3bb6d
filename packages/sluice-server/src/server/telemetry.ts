// OpenTelemetry for the service: the SDK's MeterProvider (and TracerProvider, with `traces: true`)
// exporting over OTLP/HTTP as the config's `telemetry:` says, and a request's W3C `traceparent`
// made the active context while it is answered, so its decision span joins the caller's trace.
// The SDK packages are optional peers, loaded only when telemetry is configured.
import type { IncomingHttpHeaders } from 'node:http'
import type { Logger } from 'pino'
import { InvalidConfigError } from 'sluice'
import type { OtelMeterLike, OtelTracerLike } from 'sluice/metrics'
import type { TelemetrySettings } from './config-telemetry.js'
import { redactTelemetry } from './config-telemetry.js'

/**
 * What `telemetry:` needs installed, as `npm install` takes it: the line of each package the
 * service is tested with (its optional peer ranges in package.json), no shell quoting needed.
 */
export const TELEMETRY_PACKAGES: readonly string[] = [
  '@opentelemetry/api@1',
  '@opentelemetry/sdk-metrics@3',
  '@opentelemetry/exporter-metrics-otlp-http@0.301',
  '@opentelemetry/resources@3',
]
/** And what `traces: true` needs besides. */
export const TRACE_PACKAGES: readonly string[] = [
  '@opentelemetry/sdk-trace@3',
  '@opentelemetry/exporter-trace-otlp-http@0.301',
  '@opentelemetry/core@3',
  '@opentelemetry/context-async-hooks@3',
]

/** OpenTelemetry providers started from a `telemetry:` config; `createService({ telemetry })` uses them. */
export interface ServiceTelemetry {
  /** The SDK's Meter the decision metrics are recorded on. */
  readonly meter: OtelMeterLike
  /** The SDK's Tracer for decision spans; undefined without `traces: true`. */
  readonly tracer: OtelTracerLike | undefined
  /**
   * Run `answer` with the trace of the request's `traceparent` header as the active context (as it
   * is without one, or without traces).
   */
  inTrace<T>(headers: IncomingHttpHeaders | Readonly<Record<string, string | undefined>>, answer: () => T): T
  /** Export what is pending and stop (the service calls it on close). */
  shutdown(): Promise<void>
}

/** Options of `startTelemetry`. */
export interface StartTelemetryOptions {
  /** Where export failures are logged (at warn). Default: not logged. */
  logger?: Logger
  /** `service.name` of the exported resource. Default `sluice`. */
  serviceName?: string
}

/** Import an optional peer, or say which packages to install. */
async function load<T>(name: string, all: readonly string[]): Promise<T> {
  try {
    return (await import(name)) as T
  } catch (error) {
    const code = (error as { code?: unknown }).code
    if (
      (code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND') &&
      String(error).includes(`'${name}`)
    )
      throw new InvalidConfigError(
        `telemetry: needs the OpenTelemetry SDK (${name} is missing): npm install ${all.join(' ')}`,
        { cause: error },
      )
    throw error
  }
}

type Api = typeof import('@opentelemetry/api')
type SdkMetrics = typeof import('@opentelemetry/sdk-metrics')
type MetricExporter = typeof import('@opentelemetry/exporter-metrics-otlp-http')
type Resources = typeof import('@opentelemetry/resources')
type SdkTrace = typeof import('@opentelemetry/sdk-trace')
type TraceExporter = typeof import('@opentelemetry/exporter-trace-otlp-http')
type Core = typeof import('@opentelemetry/core')
type ContextHooks = typeof import('@opentelemetry/context-async-hooks')

/**
 * Start OpenTelemetry export as `settings` (a config's `telemetry`) say. Rejects with
 * `InvalidConfigError` naming the packages to install when the SDK is missing.
 * @example
 * const config = await loadConfig('sluice.yaml')
 * const telemetry = config.telemetry && (await startTelemetry(config.telemetry))
 * const service = createService({ config, ...(telemetry ? { telemetry } : {}) })
 */
export async function startTelemetry(
  settings: TelemetrySettings,
  options: StartTelemetryOptions = {},
): Promise<ServiceTelemetry> {
  const all = settings.traces ? [...TELEMETRY_PACKAGES, ...TRACE_PACKAGES] : [...TELEMETRY_PACKAGES]
  const api = await load<Api>('@opentelemetry/api', all)
  const sdkMetrics = await load<SdkMetrics>('@opentelemetry/sdk-metrics', all)
  const { OTLPMetricExporter } = await load<MetricExporter>('@opentelemetry/exporter-metrics-otlp-http', all)
  const { resourceFromAttributes } = await load<Resources>('@opentelemetry/resources', all)
  const { logger } = options
  if (logger !== undefined) {
    // Export failures reach OpenTelemetry's diagnostic logger; without one they vanish.
    const warn = (message: string, ...args: unknown[]) =>
      logger.warn({ detail: args.map(String).join(' ').slice(0, 500) }, `telemetry: ${message}`)
    api.diag.setLogger(
      { error: warn, warn, info: () => {}, debug: () => {}, verbose: () => {} },
      api.DiagLogLevel.WARN,
    )
  }
  const resource = resourceFromAttributes({ 'service.name': options.serviceName ?? 'sluice' })
  const exporterOptions = { headers: { ...settings.headers } }
  const reader = new sdkMetrics.PeriodicExportingMetricReader({
    exporter: new OTLPMetricExporter({ ...exporterOptions, url: `${settings.endpoint}/v1/metrics` }),
    exportIntervalMillis: settings.intervalMs,
    exportTimeoutMillis: Math.min(settings.intervalMs, 30_000),
  })
  const meterProvider = new sdkMetrics.MeterProvider({ resource, readers: [reader] })
  const meter = meterProvider.getMeter('sluice')
  const shutdowns: (() => Promise<void>)[] = [() => meterProvider.shutdown()]
  let tracer: OtelTracerLike | undefined
  let inTrace: ServiceTelemetry['inTrace'] = (_headers, answer) => answer()
  if (settings.traces) {
    const sdkTrace = await load<SdkTrace>('@opentelemetry/sdk-trace', all)
    const { OTLPTraceExporter } = await load<TraceExporter>('@opentelemetry/exporter-trace-otlp-http', all)
    const { W3CTraceContextPropagator } = await load<Core>('@opentelemetry/core', all)
    const { AsyncLocalStorageContextManager } = await load<ContextHooks>(
      '@opentelemetry/context-async-hooks',
      all,
    )
    const tracerProvider = new sdkTrace.TracerProvider({
      resource,
      spanProcessors: [
        new sdkTrace.BatchSpanProcessor({
          exporter: new OTLPTraceExporter({ ...exporterOptions, url: `${settings.endpoint}/v1/traces` }),
        }),
      ],
    })
    shutdowns.push(() => tracerProvider.shutdown())
    tracer = tracerProvider.getTracer('sluice')
    // Spans start in the active context: a context manager must carry it across the awaits between
    // the request and its decision. One already registered (an embedding application's) is kept.
    const manager = new AsyncLocalStorageContextManager()
    if (api.context.setGlobalContextManager(manager.enable()))
      shutdowns.push(async () => api.context.disable())
    else manager.disable()
    const propagator = new W3CTraceContextPropagator()
    const { context, ROOT_CONTEXT, defaultTextMapGetter } = api
    inTrace = (headers, answer) => {
      if (headers.traceparent === undefined) return answer()
      return context.with(propagator.extract(ROOT_CONTEXT, headers, defaultTextMapGetter), answer)
    }
  }
  logger?.info(
    { ...redactTelemetry(settings), traces: settings.traces },
    'telemetry: exporting over OTLP/HTTP',
  )
  return {
    meter,
    tracer,
    inTrace,
    async shutdown() {
      await Promise.allSettled(shutdowns.map((stop) => stop()))
    },
  }
}
