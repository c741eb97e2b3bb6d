#!/usr/bin/env node
import type { FSWatcher } from 'node:fs'
// The `sluice` command. `sluice serve` runs the decision service (in-memory store by default);
// `sluice check` validates a config file and prints what it understood.
import { watch } from 'node:fs'
import { readFile, writeFile } from 'node:fs/promises'
import { basename, dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import type { Logger } from 'pino'
import { pino } from 'pino'
import { InvalidConfigError, SluiceError } from 'sluice'
import { closest } from 'sluice/internal'
import type { EnvoyRules } from './envoy/config.js'
import { describeEnvoyConfig, loadEnvoyConfig } from './envoy/config.js'
import type { ServiceConfig } from './server/config.js'
import { describeConfig, loadConfig, parseConfig, validateAdminToken } from './server/config.js'
import { describeRegions, type RegionsSettings } from './server/config-regions.js'
import { checkListenerTls, listenerTlsFiles } from './server/listener-tls.js'
import { createService } from './server/service.js'
import { openRegionStore } from './server/store-regions.js'
import { openStore, redactStoreUrl } from './server/store-url.js'
import { startTelemetry } from './server/telemetry.js'

const HELP = `Usage: sluice <command> [options]

Commands:
  serve    Run the decision service              (sluice serve --help)
  check    Validate a config file and print it   (sluice check --help)
  init     Write a commented starter sluice.yaml (sluice init --help)

  sluice --help       This text
  sluice --version    The version of Sluice
`

const SERVE_HELP = `Usage: sluice serve [--config FILE] [--port N] [--host H] [--store URL]
                    [--grpc-port N --envoy-config PATH]

Run the decision service: POST /v1/check, /v1/peek, GET /v1/authz (nginx auth_request),
POST /v1/reset, /v1/block (admin), GET /healthz, /readyz, /metrics, /dashboard (live).

  --config FILE  YAML config (default examples/sluice.yaml, or SLUICE_CONFIG)
  --port N       Port to listen on (default 8080, or SLUICE_PORT; 0 picks a free port)
  --host H       Address to bind (default 127.0.0.1, or SLUICE_HOST)
  --store URL    memory | redis://host:port[/db] | rediss://... | redis+cluster://h1:p1,h2:p2
                 | redis+sentinel://s1:26379,s2:26379/mastername[?db=N&sentinel_password=...]
                 | memcached://host:port | postgres://user:password@host:port/db
                 (default: SLUICE_STORE, then REDIS_URL, then the config's store: line, then memory)
  --envoy-config PATH  envoyproxy/ratelimit YAML (a file or a folder of files; or envoy.config)
  --grpc-port N  Serve Envoy's rate limit service (gRPC ShouldRateLimit) on N, bound to grpc.host
                 (default 127.0.0.1); default 8081 when an Envoy config is given (or grpc.port)

Environment: SLUICE_ADMIN_TOKEN (admin endpoints), SLUICE_LOG_LEVEL (pino level, default info).
Signals: SIGHUP reloads the config (so does saving the file); SIGTERM/SIGINT stop gracefully.
`

const CHECK_HELP = `Usage: sluice check [--config FILE] [--store URL] [--envoy-config PATH]

Validate a config file (default examples/sluice.yaml, or SLUICE_CONFIG) and print the policies,
tiers and settings it defines, and the store \`sluice serve\` would use with the same flags and
environment (and where that choice came from). Exits 1 with file, line and path when it is not valid.
With --envoy-config (or the config's envoy.config), also validate that envoyproxy/ratelimit config
(a file or a folder) and print its domains and limits; --envoy-config alone checks only that.
`

const INIT_HELP = `Usage: sluice init [--config FILE] [--force]

Write a commented starter config (default ./sluice.yaml) to edit, then run
\`sluice check --config sluice.yaml\` and \`sluice serve --config sluice.yaml\`.
Refuses to overwrite an existing file unless --force is given.
`

/** Usage lines by command, printed after a flag mistake. */
const USAGE: Record<string, string> = {
  serve: SERVE_HELP.split('\n')[0]!,
  check: CHECK_HELP.split('\n')[0]!,
  init: INIT_HELP.split('\n')[0]!,
}

type Flags = NonNullable<Parameters<typeof parseArgs>[0]>['options']

/**
 * The command's flags, or exit 2 with what was wrong and the command's usage line (an unknown or
 * misspelled flag is a mistake to point at, not a stack trace).
 */
function flags<const O extends Flags>(command: string, argv: string[], options: O) {
  try {
    return parseArgs({ args: argv, options, strict: true, allowPositionals: false }).values
  } catch (error) {
    let message = (error as Error).message.split('\n')[0]!
    const unknown = /^Unknown option '--([^'=]+)'/.exec(message)
    if (unknown !== null) {
      const meant = closest(unknown[1]!, Object.keys(options ?? {}))
      if (meant !== undefined) message = `Unknown option '--${unknown[1]}'; did you mean '--${meant}'?`
    }
    process.stderr.write(`sluice ${command}: ${message}\n${USAGE[command]}\n`)
    process.exit(2)
  }
}

/** The package's own package.json, next to dist/. */
function packageRoot(): string {
  return resolve(dirname(fileURLToPath(import.meta.url)), '..')
}

/** The example config shipped with the package, next to dist/. */
function defaultConfigPath(): string {
  return resolve(packageRoot(), 'examples', 'sluice.yaml')
}

/** An environment variable, with empty meaning unset. */
function env(name: string): string | undefined {
  const value = process.env[name]
  return value === undefined || value === '' ? undefined : value
}

function configPath(flag: string | undefined): string {
  return flag ?? env('SLUICE_CONFIG') ?? defaultConfigPath()
}

function failAndExit(error: unknown): never {
  const message = error instanceof SluiceError ? error.message : String((error as Error)?.stack ?? error)
  process.stderr.write(`sluice: ${message}\n`)
  process.exit(1)
}

/** A store URL and where it was given. */
interface StoreSource {
  url: string
  source: string
  /** The config's `store: { regions }` block, when the config's store is the one chosen. */
  regions?: RegionsSettings
}

/** The store `serve` opens, where that came from, and the stores also given that it wins over. */
interface StoreChoice extends StoreSource {
  overrides: StoreSource[]
}

/**
 * The store `serve` opens. The flag and SLUICE_STORE are Sluice's own, so they win; then the
 * environment beats the file, as on a PaaS where a Redis add-on sets REDIS_URL while the config
 * still holds the starter's `store: memory` (every process would otherwise count alone); then the
 * config's `store:` line; then memory.
 */
function chooseStore(flag: string | undefined, config: ServiceConfig): StoreChoice {
  const given: (StoreSource | undefined)[] = [
    flag === undefined ? undefined : { url: flag, source: '--store' },
    sourced(env('SLUICE_STORE'), 'SLUICE_STORE'),
    sourced(env('REDIS_URL'), 'REDIS_URL'),
    config.storeWritten
      ? {
          url: config.store,
          source: `${config.file} store:`,
          ...(config.regions === undefined ? {} : { regions: config.regions }),
        }
      : undefined,
  ]
  const [chosen = { url: config.store, source: 'default' }, ...others] = given.filter(
    (candidate) => candidate !== undefined,
  )
  return { ...chosen, overrides: others.filter((other) => other.url.trim() !== chosen.url.trim()) }
}

function sourced(url: string | undefined, source: string): StoreSource | undefined {
  return url === undefined ? undefined : { url, source }
}

/**
 * The loud line when REDIS_URL and the store chosen disagree: REDIS_URL wins over the config, or
 * loses to --store / SLUICE_STORE. The flag and SLUICE_STORE overriding the config alone are a choice
 * made in Sluice's own terms, which the banner's `from` states.
 */
function storeOverrideWarning(choice: StoreChoice): string | undefined {
  const redisUrlInvolved =
    choice.source === 'REDIS_URL' || choice.overrides.some((other) => other.source === 'REDIS_URL')
  if (choice.overrides.length === 0 || !redisUrlInvolved) return undefined
  const others = choice.overrides.map((o) => `${describeChoice(o)} (from ${o.source})`).join(' or ')
  return `WARNING: the store is ${describeChoice(choice)} (from ${choice.source}), not ${others}`
}

/** The chosen store for `sluice check`, redacted: a URL, or the regions of a multi-region block. */
function describeChoice(choice: StoreSource): string {
  return choice.regions === undefined
    ? redactStoreUrl(choice.url)
    : `multi-region (${describeRegions(choice.regions)})`
}

/**
 * Watch the folders of the listeners' TLS files (as named at start); `changed` on an event for one
 * of them or for Kubernetes' `..data` links. A folder that cannot be watched is logged: SIGHUP then.
 */
function watchCertificates(config: ServiceConfig, logger: Logger, changed: () => void): FSWatcher[] {
  const byFolder = new Map<string, Set<string>>()
  for (const file of listenerTlsFiles(config)) {
    const names = byFolder.get(dirname(file)) ?? new Set<string>()
    names.add(basename(file))
    byFolder.set(dirname(file), names)
  }
  const watchers: FSWatcher[] = []
  for (const [folder, names] of byFolder) {
    try {
      watchers.push(
        watch(folder, (_event, name) => {
          if (name !== null && (names.has(name) || name.startsWith('..'))) changed()
        }),
      )
    } catch (error) {
      logger.warn({ folder, err: error }, 'cannot watch the TLS certificate folder; reload with SIGHUP')
    }
  }
  return watchers
}

async function check(argv: string[]): Promise<void> {
  const values = flags('check', argv, {
    config: { type: 'string' },
    store: { type: 'string' },
    'envoy-config': { type: 'string' },
    help: { type: 'boolean' },
  })
  if (values.help) {
    process.stdout.write(CHECK_HELP)
    return
  }
  try {
    const envoyFlag = values['envoy-config']
    let envoyPath = envoyFlag
    if (envoyFlag === undefined || values.config !== undefined || env('SLUICE_CONFIG') !== undefined) {
      const config = await loadConfig(configPath(values.config))
      const store = chooseStore(values.store, config)
      checkListenerTls(config)
      process.stdout.write(describeConfig(config))
      process.stdout.write(`  sluice serve would use: ${describeChoice(store)} (from ${store.source})\n`)
      const warning = storeOverrideWarning(store)
      if (warning !== undefined) process.stdout.write(`  ${warning}\n`)
      envoyPath ??= config.envoy.config
    }
    if (envoyPath !== undefined) process.stdout.write(describeEnvoyConfig(await loadEnvoyConfig(envoyPath)))
  } catch (error) {
    failAndExit(error)
  }
}

/** A commented starter config: what `sluice init` writes. */
const STARTER = `# Sluice decision service config. Reference: docs/service.md in the package.
# Check it with \`sluice check --config sluice.yaml\`, run it with \`sluice serve --config sluice.yaml\`.
# Durations: 500ms, 10s, 10m, 1h, 1d (or whole milliseconds).

# Where counters live: memory (one process), redis://host:6379/0, rediss://..., or
# redis+cluster://host1:port1,host2:port2 (the redis stores need \`npm install ioredis\`).
# --store, SLUICE_STORE or REDIS_URL, when set, win over this line (\`sluice check\` prints which store serve would use).
store: memory
prefix: sluice        # Redis key prefix
onStoreError: open    # when the store fails: open (allow) | closed (deny) | memory (decide locally)

policies:
  # 100 requests a minute per key, bursts of up to 20 at once.
  api: { algorithm: token-bucket, limit: 100, window: 1m, burst: 20 }
  # Exact: 5 attempts in any 15 minutes; deny when the store is down.
  login: { algorithm: sliding-window-log, limit: 5, window: 15m, onStoreError: closed }

# tiers:               # per-tier overrides, picked with "tier" in /v1/check or ?tier= in /v1/authz
#   pro: { api: { limit: 1000, burst: 200 } }

# authz:               # GET /v1/authz (nginx auth_request): the key is the client IP by default
#   keyHeader: x-api-key

# admin:               # POST /v1/reset and /v1/block need \`Authorization: Bearer <token>\`
#   token: use-a-long-random-secret   # or SLUICE_ADMIN_TOKEN; without one they are off
`

async function init(argv: string[]): Promise<void> {
  const values = flags('init', argv, {
    config: { type: 'string' },
    force: { type: 'boolean' },
    help: { type: 'boolean' },
  })
  if (values.help) {
    process.stdout.write(INIT_HELP)
    return
  }
  const file = values.config ?? 'sluice.yaml'
  try {
    // The starter must always be a valid config: check it before writing it.
    parseConfig(STARTER, 'starter')
    await writeFile(file, STARTER, { flag: values.force ? 'w' : 'wx' })
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST')
      failAndExit(`${file} exists; pass --force to overwrite it`)
    failAndExit(error)
  }
  process.stdout.write(
    `wrote ${file}\n  next: sluice check --config ${file}\n        sluice serve --config ${file}\n`,
  )
}

async function version(): Promise<void> {
  const text = await readFile(join(packageRoot(), 'package.json'), 'utf8')
  process.stdout.write(`${(JSON.parse(text) as { version: string }).version}\n`)
}

async function serve(argv: string[]): Promise<void> {
  const values = flags('serve', argv, {
    config: { type: 'string' },
    port: { type: 'string' },
    host: { type: 'string' },
    store: { type: 'string' },
    'grpc-port': { type: 'string' },
    'envoy-config': { type: 'string' },
    help: { type: 'boolean' },
  })
  if (values.help) {
    process.stdout.write(SERVE_HELP)
    return
  }
  const file = configPath(values.config)
  const portText = values.port ?? env('SLUICE_PORT') ?? '8080'
  const port = Number(portText)
  if (!/^\d{1,5}$/.test(portText) || port > 65535)
    failAndExit(`--port ${portText}: use a number from 0 to 65535`)
  const host = values.host ?? env('SLUICE_HOST') ?? '127.0.0.1'
  const logger = pino({ level: env('SLUICE_LOG_LEVEL') ?? 'info' })

  let config: ServiceConfig
  // The text of the config in force, read before anything can change it.
  let textInForce: string
  try {
    textInForce = await readFile(file, 'utf8').catch((error: unknown) => {
      throw new InvalidConfigError(`${file}: cannot read the config file (${(error as Error).message})`)
    })
    config = parseConfig(textInForce, file)
  } catch (error) {
    failAndExit(error)
  }
  const storeChoice = chooseStore(values.store, config)
  const storeWarning = storeOverrideWarning(storeChoice)
  const envoyPath = values['envoy-config'] ?? config.envoy.config
  const grpcPortText = values['grpc-port']
  if (grpcPortText !== undefined && (!/^\d{1,5}$/.test(grpcPortText) || Number(grpcPortText) > 65535))
    failAndExit(`--grpc-port ${grpcPortText}: use a number from 0 to 65535`)
  const grpcPort =
    grpcPortText !== undefined
      ? Number(grpcPortText)
      : (config.grpc.port ?? (envoyPath === undefined ? undefined : 8081))
  let envoy: EnvoyRules | undefined
  let service: ReturnType<typeof createService>
  try {
    if (envoyPath !== undefined) envoy = await loadEnvoyConfig(envoyPath)
    const store =
      storeChoice.regions === undefined
        ? await openStore(storeChoice.url, {
            prefix: config.prefix,
            logger,
            ...(config.storeTls === undefined ? {} : { tls: config.storeTls }),
            ...(config.storeCompactValues === undefined ? {} : { compactValues: config.storeCompactValues }),
          })
        : await openRegionStore(storeChoice.regions, { prefix: config.prefix, logger })
    const adminToken = env('SLUICE_ADMIN_TOKEN')
    validateAdminToken(adminToken, 'SLUICE_ADMIN_TOKEN')
    const telemetry =
      config.telemetry === undefined ? undefined : await startTelemetry(config.telemetry, { logger })
    service = createService({
      config,
      store,
      logger,
      ...(adminToken === undefined ? {} : { adminToken }),
      ...(envoy === undefined ? {} : { envoy }),
      ...(grpcPort === undefined ? {} : { grpc: { port: grpcPort, host: config.grpc.host } }),
      ...(telemetry === undefined ? {} : { telemetry }),
    })
  } catch (error) {
    failAndExit(error)
  }

  let address: Awaited<ReturnType<typeof service.listen>>
  try {
    address = await service.listen(port, host)
  } catch (error) {
    failAndExit(`cannot listen on ${host}:${port}: ${(error as Error).message}`)
  }
  // Reload on SIGHUP and when the file changes; an invalid config is logged and the old one kept.
  // A file event whose text equals the config in force (editors write twice, touch) is ignored.
  let reloading = Promise.resolve()
  // Set by a refused reload, so that restoring the file in force says so rather than nothing.
  let refused = false
  const reload = (trigger: 'SIGHUP' | 'file change' | 'envoy config change' | 'certificate change') => {
    reloading = reloading.then(async () => {
      try {
        const text = await readFile(file, 'utf8').catch((error: unknown) => {
          throw new InvalidConfigError(`${file}: cannot read the config file (${(error as Error).message})`)
        })
        const next = parseConfig(text, file)
        // The Envoy rules are read again on every reload (SIGHUP, either config changing).
        const nextEnvoyPath = values['envoy-config'] ?? next.envoy.config
        const nextEnvoy = nextEnvoyPath === undefined ? undefined : await loadEnvoyConfig(nextEnvoyPath)
        if (trigger === 'file change' && text === textInForce && nextEnvoy === undefined) {
          if (refused) logger.info({ file, trigger }, 'config file valid again; it is the config in force')
          refused = false
          return
        }
        service.reload(next, nextEnvoy)
        textInForce = text
        refused = false
        logger.info({ file, trigger }, 'new config in force')
      } catch (error) {
        refused = true
        logger.error(
          { file, trigger, error: error instanceof SluiceError ? error.code : 'unknown' },
          `config refused, keeping the previous one: ${(error as Error).message}`,
        )
      }
    })
  }
  process.on('SIGHUP', () => reload('SIGHUP'))

  // Watch the folder, not the file: editors and `mv` replace the file, which ends a file watch.
  let watcher: FSWatcher | undefined
  let debounce: NodeJS.Timeout | undefined
  try {
    watcher = watch(dirname(resolve(file)), (_event, name) => {
      if (name !== basename(file)) return
      clearTimeout(debounce)
      debounce = setTimeout(() => reload('file change'), 150)
    })
  } catch (error) {
    logger.warn({ file, err: error }, 'cannot watch the config file; reload with SIGHUP')
  }
  // The Envoy config (a file, or a folder of files) reloads when it changes too.
  let envoyWatcher: FSWatcher | undefined
  if (envoyPath !== undefined) {
    try {
      envoyWatcher = watch(envoyPath, () => {
        clearTimeout(debounce)
        debounce = setTimeout(() => reload('envoy config change'), 150)
      })
    } catch (error) {
      logger.warn({ file: envoyPath, err: error }, 'cannot watch the Envoy config; reload with SIGHUP')
    }
  }

  // The listeners' certificate files: renewing them (cert-manager, Kubernetes' `..data` swap of a
  // mounted secret) reloads, so new connections get the new certificate.
  const certWatchers = watchCertificates(config, logger, () => {
    clearTimeout(debounce)
    debounce = setTimeout(() => reload('certificate change'), 150)
  })

  // Printed once the config is watched: a caller that edits the file on seeing the banner is heard.
  const { url } = address
  process.stdout.write(
    [
      `sluice serving on ${url} (store: ${service.store.description}, config: ${file})`,
      ...(storeWarning === undefined ? [] : [`  ${storeWarning}`]),
      `  POST ${url}/v1/check     {"policy":"${config.policyNames[0]}","key":"user-42"}`,
      `  POST ${url}/v1/peek`,
      `  GET  ${url}/v1/authz?policy=${config.policyNames[0]}   (nginx auth_request)`,
      `  POST ${url}/v1/reset, ${url}/v1/block   (admin: ${service.config.adminToken !== undefined || env('SLUICE_ADMIN_TOKEN') ? 'on' : 'off'})`,
      `  GET  ${url}/healthz  ${url}/readyz  ${url}/metrics`,
      `  dashboard: ${service.dashboardAddress?.url ?? url}/dashboard${config.dashboard.token === undefined ? '' : '?token=<dashboard.token>'}`,
      ...(service.grpcAddress === undefined
        ? []
        : [
            `  gRPC ${service.grpcAddress.url}  envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit (envoy config: ${envoyPath})`,
          ]),
      '',
    ].join('\n'),
  )
  if (storeWarning !== undefined)
    logger.warn(
      { store: service.store.description, from: storeChoice.source },
      `${storeWarning.replace(/^WARNING: /, '')}; set --store or SLUICE_STORE to choose another`,
    )

  let stopping = false
  const stop = (signal: string) => {
    if (stopping) return
    stopping = true
    logger.info({ signal }, 'stopping: finishing in-flight requests')
    watcher?.close()
    envoyWatcher?.close()
    for (const certWatcher of certWatchers) certWatcher.close()
    clearTimeout(debounce)
    service.close().then(
      () => process.exit(0),
      (error: unknown) => {
        logger.error({ err: error }, 'error while stopping')
        process.exit(1)
      },
    )
  }
  process.once('SIGTERM', () => stop('SIGTERM'))
  process.once('SIGINT', () => stop('SIGINT'))
}

const [command, ...rest] = process.argv.slice(2)
if (command === 'serve') serve(rest).catch(failAndExit)
else if (command === 'check') check(rest).catch(failAndExit)
else if (command === 'init') init(rest).catch(failAndExit)
else if (command === '--version' || command === '-v' || command === 'version') version().catch(failAndExit)
else if (command === undefined || command === '--help' || command === '-h' || command === 'help')
  process.stdout.write(HELP)
else {
  process.stderr.write(`sluice: unknown command ${JSON.stringify(command)}\n\n${HELP}`)
  process.exitCode = 2
}
