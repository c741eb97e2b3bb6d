// The built package loads its Lua scripts and decides from dist/, as ESM and as CommonJS.
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { describe, expect, inject, it } from 'vitest'

const run = promisify(execFile)

const program = (load: string) => `
${load}
const client = new Redis(${inject('redis').port}, '127.0.0.1')
const store = redisStore(client, { prefix: 'dist-' + process.pid })
const policy = { name: 'p', algorithm: 'fixed-window', limit: 2, windowMs: 60000, capacity: 2 }
const out = []
for (let i = 0; i < 3; i++) out.push((await store.apply([{ policy, key: 'k', cost: 1 }], 'consume'))[0].allowed)
await store.reset([{ policy, key: 'k', cost: 1 }])
console.log(JSON.stringify(out))
client.disconnect()
`

describe('dist/ (npm run build first)', () => {
  it('ESM: import from packages/sluice/dist/redis.js', async () => {
    const code = program(
      "import { redisStore } from './packages/sluice/dist/redis.js'\nimport { Redis } from 'ioredis'",
    )
    const { stdout } = await run('node', ['--input-type=module', '-e', code])
    expect(JSON.parse(stdout)).toEqual([true, true, false])
  })
  it('CJS: require packages/sluice/dist/redis.cjs', async () => {
    const code = `(async () => {${program("const { redisStore } = require('./packages/sluice/dist/redis.cjs')\nconst { Redis } = require('ioredis')")}})()`
    const { stdout } = await run('node', ['-e', code])
    expect(JSON.parse(stdout)).toEqual([true, true, false])
  })
})
