// A policy with `penalty` behind an adapter, through a real server: the denial that earns the
// penalty and the requests after it answer 429 with Retry-After = what is left of the block.
import { afterEach, describe, expect, it } from 'vitest'
import { createHttpLimiter } from '../../packages/sluice/src/http/index.js'
import { createLimiter } from '../../packages/sluice/src/limiter.js'
import { memoryStore } from '../../packages/sluice/src/stores/memory.js'
import { fakeClock } from '../helpers/fake-clock.js'
import { adapters, call, type Running } from './servers.js'

const express = adapters.find((a) => a.name.startsWith('express'))!

describe(`penalty through ${express.name}`, () => {
  let running: Running | undefined
  afterEach(async () => {
    await running?.close()
    running = undefined
  })

  it('answers 429 with Retry-After = the block, counting down', async () => {
    const clock = fakeClock()
    const limiter = createLimiter({
      store: memoryStore({ now: clock.now }),
      policies: {
        perIp: {
          algorithm: 'fixed-window',
          limit: 1,
          window: '1m',
          penalty: { after: 2, within: '1m', block: '10m', max: '1h' },
        },
      },
    })
    running = await express.start(createHttpLimiter({ limiter, rules: [{ policy: 'perIp', key: 'ip' }] }), {
      port: 0,
    })
    const target = running.target
    const get = () => call(target, '/hello')
    expect((await get()).status).toBe(200)
    const limited = await get()
    expect([limited.status, limited.headers['retry-after']]).toEqual([429, '60'])
    const penalised = await get()
    expect([penalised.status, penalised.headers['retry-after']]).toEqual([429, '600'])
    expect(JSON.parse(penalised.body)).toMatchObject({ retry_after: 600, policy: 'perIp' })
    clock.advance(400_000)
    const blocked = await get()
    expect([blocked.status, blocked.headers['retry-after']]).toEqual([429, '200'])
    clock.advance(200_000)
    expect((await get()).status).toBe(200)
    // The second offence: twice the block.
    await get()
    expect((await get()).headers['retry-after']).toBe('1200')
  })
})
