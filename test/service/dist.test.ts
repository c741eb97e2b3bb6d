// `sluice/server` as a user gets it: the built package (npm run build first), ESM and CommonJS.
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

describe('sluice/server from dist/', () => {
  it('ESM: import from the package name', async () => {
    const code = program(
      "import { createService, parseConfig } from 'sluice/server'\nimport { pino } from 'pino'",
    )
    const { stdout } = await run('node', ['--input-type=module', '-e', code])
    expect(JSON.parse(stdout)).toEqual([true, false])
  })
  it('CJS: require the package name', async () => {
    const code = `(async () => {${program("const { createService, parseConfig } = require('sluice/server')\nconst { pino } = require('pino')")}})()`
    const { stdout } = await run('node', ['-e', code])
    expect(JSON.parse(stdout)).toEqual([true, false])
  })
})
