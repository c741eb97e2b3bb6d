// `sluice-server` as a user gets it: the built package (npm run build first), ESM and CommonJS.
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { describe, expect, it } from 'vitest'

const run = promisify(execFile)

const program = (load: string) => `
${load}
const config = parseConfig('policies:\\n  api: { algorithm: fixed-window, limit: 1, window: 1m }\\n', 'inline')
const service = createService({ config, logger: pino({ level: 'silent' }) })
const { url } = await service.listen(0)
const out = []
for (let i = 0; i < 2; i++) {
  const res = await fetch(url + '/v1/check', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ policy: 'api', key: 'k' }) })
  out.push((await res.json()).allowed)
}
await service.close()
console.log(JSON.stringify(out))
`

describe('sluice-server from packages/sluice-server/dist/', () => {
  it('ESM: import from the package name', async () => {
    const code = program(
      "import { createService, parseConfig } from 'sluice-server'\nimport { pino } from 'pino'",
    )
    const { stdout } = await run('node', ['--input-type=module', '-e', code])
    expect(JSON.parse(stdout)).toEqual([true, false])
  })
  it('CJS: require the package name', async () => {
    const code = `(async () => {${program("const { createService, parseConfig } = require('sluice-server')\nconst { pino } = require('pino')")}})()`
    const { stdout } = await run('node', ['-e', code])
    expect(JSON.parse(stdout)).toEqual([true, false])
  })

  // The gRPC listener loads rls.proto from beside the built chunks (packages/sluice-server/dist/rls.proto), in both formats.
  const grpcProgram = (load: string) => `
${load}
const config = parseConfig('policies:\\n  api: { algorithm: fixed-window, limit: 1, window: 1m }\\n', 'inline')
const envoy = parseEnvoyConfig([{ file: 'r.yaml', text: 'domain: d\\ndescriptors:\\n  - key: u\\n    rate_limit: { unit: hour, requests_per_unit: 1 }\\n' }])
const service = createService({ config, envoy, grpc: { port: 0 }, logger: pino({ level: 'silent' }) })
await service.listen(0)
const def = loadSync(require_resolve_proto, { keepCase: true, enums: String, defaults: true })
const Client = loadPackageDefinition(def).envoy.service.ratelimit.v3.RateLimitService
const client = new Client(service.grpcAddress.url, credentials.createInsecure())
const ask = () => new Promise((ok, no) => client.ShouldRateLimit({ domain: 'd', descriptors: [{ entries: [{ key: 'u', value: 'x' }] }] }, (e, r) => (e ? no(e) : ok(r.overall_code))))
const out = [await ask(), await ask()]
client.close()
await service.close()
console.log(JSON.stringify(out))
`
  const protoPath =
    "const require_resolve_proto = require('node:path').join(require('node:path').dirname(require.resolve('sluice-server')), 'rls.proto')"
  it('ESM and CJS: the gRPC listener answers from the built package', async () => {
    const esm = grpcProgram(
      `import { createService, parseConfig, parseEnvoyConfig } from 'sluice-server'\nimport { pino } from 'pino'\nimport { createRequire } from 'node:module'\nimport { loadSync } from '@grpc/proto-loader'\nimport { credentials, loadPackageDefinition } from '@grpc/grpc-js'\nconst require = createRequire(import.meta.url)\n${protoPath}`,
    )
    expect(JSON.parse((await run('node', ['--input-type=module', '-e', esm])).stdout)).toEqual([
      'OK',
      'OVER_LIMIT',
    ])
    const cjs = `(async () => {${grpcProgram(
      `const { createService, parseConfig, parseEnvoyConfig } = require('sluice-server')\nconst { pino } = require('pino')\nconst { loadSync } = require('@grpc/proto-loader')\nconst { credentials, loadPackageDefinition } = require('@grpc/grpc-js')\n${protoPath}`,
    )}})()`
    expect(JSON.parse((await run('node', ['-e', cjs])).stdout)).toEqual(['OK', 'OVER_LIMIT'])
  })
})
