// Store TLS settings as written: the `tls_*` URL parameters and the config's `store.tls` block,
// checked strictly (file:line, "did you mean"), joined, refused where they would be ignored, and
// printed by `sluice check` as paths.
import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { InvalidConfigError } from '../../packages/sluice/src/errors.js'
import { describeConfig, parseConfig } from '../../packages/sluice-server/src/server/config.js'
import { parseStoreUrl, storeTlsSettings } from '../../packages/sluice-server/src/server/store-url.js'

const POLICIES = 'policies:\n  api: { algorithm: token-bucket, limit: 100, window: 1m }\n'

function refusal(run: () => unknown): InvalidConfigError {
  try {
    run()
  } catch (error) {
    expect(error).toBeInstanceOf(InvalidConfigError)
    return error as InvalidConfigError
  }
  throw new Error('expected a refusal')
}

describe('tls_* URL parameters', () => {
  it('rediss:// and rediss+cluster:// take tls_ca, tls_cert, tls_key and tls_servername', () => {
    const spec = parseStoreUrl(
      'rediss://:pw@cache:6380/2?tls_ca=certs/ca.pem&tls_cert=certs/c.pem&tls_key=certs/c.key&tls_servername=cache.internal',
    )
    expect(spec).toMatchObject({
      kind: 'redis',
      tls: true,
      host: 'cache',
      port: 6380,
      db: 2,
      password: 'pw',
      tlsSettings: {
        ca: 'certs/ca.pem',
        cert: 'certs/c.pem',
        key: 'certs/c.key',
        servername: 'cache.internal',
      },
    })
    expect(spec.redacted).toBe(
      'rediss://:***@cache:6380/2?tls_ca=certs/ca.pem&tls_cert=certs/c.pem&tls_key=certs/c.key&tls_servername=cache.internal',
    )
    expect(parseStoreUrl('rediss+cluster://a:7000,b:7001?tls_ca=certs/ca.pem')).toMatchObject({
      kind: 'cluster',
      tls: true,
      nodes: [
        { host: 'a', port: 7000 },
        { host: 'b', port: 7001 },
      ],
      tlsSettings: { ca: 'certs/ca.pem' },
    })
  })

  it.each([
    ['redis://cache:6379?tls_ca=certs/ca.pem', 'TLS settings need a TLS URL: rediss:// or rediss+cluster://'],
    ['redis+cluster://a:7000?tls_ca=certs/ca.pem', 'TLS settings need a TLS URL'],
    ['rediss://cache:6380?tls_cert=certs/c.pem', 'a client certificate needs both tls_cert and tls_key'],
    ['rediss://cache:6380?tls_ca=', 'tls_ca is empty'],
    ['rediss://cache:6380?tls_ca=/a&tls_ca=/b', 'tls_ca is given 2 times'],
    [
      'rediss://cache:6380?tls_cafile=certs/ca.pem',
      'unknown parameter "tls_cafile" (a Redis URL takes tls_ca',
    ],
    [
      'postgres://u:pw@db/app?tls_ca=certs/ca.pem',
      'TLS settings need sslmode=verify-full (or verify-ca, require) in the URL, got no sslmode',
    ],
    ['postgres://u:pw@db/app?sslmode=disable&tls_ca=certs/ca.pem', 'got sslmode=disable'],
    ['memcached://cache:11211?tls_ca=certs/ca.pem', 'memcached:// takes no parameters'],
  ])('%s is refused: %s', (url, message) => {
    const error = refusal(() => parseStoreUrl(url))
    expect(error.message).toContain(message)
    expect(error.message).not.toContain(':pw@')
  })

  it('postgres:// takes them beside sslmode; pg sees the rest of the query, not them', () => {
    const spec = parseStoreUrl(
      'postgres://u:pw@db:5433/app?sslmode=verify-full&tls_ca=certs/ca.pem&tls_servername=db.internal&application_name=sluice',
    )
    expect(spec).toMatchObject({
      kind: 'postgres',
      sslmode: 'verify-full',
      tlsSettings: { ca: 'certs/ca.pem', servername: 'db.internal' },
    })
    const { connectionString } = spec as { connectionString: string }
    expect(connectionString).toBe('postgres://u:pw@db:5433/app?sslmode=verify-full&application_name=sluice')
  })

  it("pg's own sslrootcert beside TLS settings is refused (it would replace them)", () => {
    const error = refusal(() =>
      storeTlsSettings(
        parseStoreUrl('postgres://db/app?sslmode=verify-full&sslrootcert=/a.pem&tls_ca=/b.pem'),
      ),
    )
    expect(error.message).toContain("sslrootcert is pg's own")
  })
})

describe('store: { url, tls } in the config', () => {
  const parse = (store: string) => parseConfig(`${store}${POLICIES}`, 'conf.yaml')

  it('reads the block; sluice check prints the paths and the server name', () => {
    const config = parse(
      'store:\n  url: rediss://:pw@cache:6380\n  tls:\n    ca: certs/ca.pem\n    cert: certs/client.pem\n    key: certs/client.key\n    servername: cache.internal\n',
    )
    expect(config.store).toBe('rediss://:pw@cache:6380')
    expect(config.storeWritten).toBe(true)
    expect(config.storeTls).toEqual({
      ca: 'certs/ca.pem',
      cert: 'certs/client.pem',
      key: 'certs/client.key',
      servername: 'cache.internal',
    })
    const described = describeConfig(config)
    expect(described).toContain('  store: rediss://:***@cache:6380')
    expect(described).toContain(
      '  store tls: ca certs/ca.pem, client cert certs/client.pem, key certs/client.key, servername cache.internal',
    )
    expect(described).not.toContain(':pw@')
  })

  it('a block without url keeps the store from --store, SLUICE_STORE or REDIS_URL', () => {
    const config = parse('store:\n  tls: { ca: certs/ca.pem }\n')
    expect(config).toMatchObject({
      store: 'memory',
      storeWritten: false,
      storeTls: { ca: 'certs/ca.pem' },
    })
    // The store chosen at start must take them: memory does not.
    expect(refusal(() => storeTlsSettings(parseStoreUrl('memory'), config.storeTls)).message).toContain(
      'the memory store has no TLS settings',
    )
  })

  it.each([
    [
      'store:\n  url: rediss://c:6380\n  tsl: {}\n',
      "conf.yaml:3: store.tsl: unknown key; did you mean 'tls'?",
    ],
    [
      'store:\n  url: rediss://c:6380\n  tls:\n    servrname: cache\n',
      "conf.yaml:4: store.tls.servrname: unknown key; did you mean 'servername'?",
    ],
    [
      'store:\n  url: rediss://c:6380\n  tls:\n    cafile: certs/ca.pem\n',
      'conf.yaml:4: store.tls.cafile: unknown key; the keys are ca, cert, key, servername',
    ],
    ['store:\n  url: rediss://c:6380\n  tls:\n    ca: 5\n', 'conf.yaml:4: store.tls.ca: must be a file path'],
    ['store:\n  url: rediss://c:6380\n  tls: certs/ca.pem\n', 'conf.yaml:3: store.tls: must be a map'],
    [
      'store:\n  url: redis://:pw@c:6379\n  tls: { ca: certs/ca.pem }\n',
      'conf.yaml:2: store.url: "redis://:***@c:6379": TLS settings need a TLS URL',
    ],
    [
      'store:\n  url: rediss://c:6380?tls_ca=/a.pem\n  tls: { ca: /b.pem }\n',
      'tls_ca in the URL and store.tls.ca both set the ca; keep one',
    ],
    [
      'store:\n  url: postgres://db/app\n  tls: { ca: certs/ca.pem }\n',
      'conf.yaml:2: store.url: "postgres://db/app": TLS settings need sslmode=verify-full',
    ],
    ['store:\n  url: rediss://c:6380\n  tls: { cert: /c.pem }\n', 'needs both tls_cert and tls_key'],
    ['store: 5\n', 'conf.yaml:1: store: must be a store URL'],
  ])('refuses %j', (store, message) => {
    const error = refusal(() => parse(store))
    expect(error.message).toContain(message)
    expect(error.message).not.toContain(':pw@')
  })
})

describe('docs/service.md', () => {
  it("the TLS example's store: block is a valid config", () => {
    const doc = readFileSync(new URL('../../docs/service.md', import.meta.url), 'utf8')
    const section = doc.slice(doc.indexOf('#### TLS to the store'))
    const block = /```yaml\n([\s\S]*?)```/.exec(section)![1]!
    const config = parseConfig(`${block}${POLICIES}`, 'docs.yaml')
    // The example's own paths (deployment paths, never read here): each file named, as written.
    expect(config.storeTls).toEqual({
      ca: expect.stringMatching(/\/redis-ca\.pem$/),
      cert: expect.stringMatching(/\/client\.pem$/),
      key: expect.stringMatching(/\/client\.key$/),
      servername: 'cache.internal',
    })
    expect(describeConfig(config)).toContain(
      `store tls: ca ${config.storeTls?.ca}, client cert ${config.storeTls?.cert}, key ${config.storeTls?.key}, servername cache.internal`,
    )
    expect(block).toContain(`ca: ${config.storeTls?.ca}`)
  })
})
