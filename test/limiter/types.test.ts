// Policy names are types: a typo is a compile error. `tsc --noEmit` checks this file (test/ is in
// tsconfig's include); each @ts-expect-error fails the type check if the error it expects goes away.
import Fastify from 'fastify'
import { describe, expect, it } from 'vitest'
import { sluice as sluiceFastify } from '../../packages/sluice/src/adapters/fastify.js'
import { createHttpLimiter, type RouteOptions } from '../../packages/sluice/src/http/index.js'
import { createLimiter, type Decision, type LayeredDecision } from '../../packages/sluice/src/limiter.js'
import { memoryStore } from '../../packages/sluice/src/stores/memory.js'

describe('typed policy names', () => {
  it('accepts configured names and rejects others at compile time', async () => {
    const limiter = createLimiter({
      policies: {
        api: { algorithm: 'token-bucket', limit: 10, window: '1s', burst: 20 },
        perIp: { algorithm: 'sliding-window-counter', limit: 1000, window: '1h' },
      },
    })
    const d: Decision = await limiter.consume('api', 'k')
    const l: LayeredDecision = await limiter.consume([{ policy: 'perIp', key: 'ip' }])
    expect(d.allowed && l.allowed).toBe(true)

    // @ts-expect-error 'typo' is not a configured policy
    await expect(limiter.consume('typo', 'k')).rejects.toMatchObject({ code: 'SLUICE_UNKNOWN_POLICY' })
    // @ts-expect-error nor in a layered check
    await expect(limiter.consume([{ policy: 'typo', key: 'k' }])).rejects.toThrow()
    // @ts-expect-error nor in peek
    await expect(limiter.peek('apii', 'k')).rejects.toThrow()
    // @ts-expect-error nor in block
    await expect(limiter.block('typo', 'k', '1s')).rejects.toThrow()
    expect(() =>
      // @ts-expect-error nor in consumeSync
      limiter.consumeSync('typo', 'k'),
    ).toThrow()
    // @ts-expect-error cost is a number
    await expect(limiter.consume('api', 'k', { cost: '2' })).rejects.toThrow()
    // @ts-expect-error the policies object checks the algorithm name
    expect(() => createLimiter({ policies: { p: { algorithm: 'leaky', limit: 1, window: '1s' } } })).toThrow()
    expect(() =>
      // @ts-expect-error concurrency takes a timeout, not a window
      createLimiter({ policies: { p: { algorithm: 'concurrency', limit: 1, window: '1s' } } }),
    ).toThrow()
  })
})

describe('typed options', () => {
  it('rejects misspelled option keys at compile time where TypeScript checks object literals', () => {
    const policies = { api: { algorithm: 'gcra', limit: 10, window: '1s' } } as const
    // @ts-expect-error stroe is not an option (store is)
    expect(() => createLimiter({ stroe: memoryStore(), policies })).toThrow("did you mean 'store'?")
    // @ts-expect-error storeTimout is not an option (storeTimeout is)
    expect(() => createLimiter({ policies, storeTimout: '50ms' })).toThrow("did you mean 'storeTimeout'?")
    const http = createHttpLimiter({
      limiter: createLimiter({ policies }),
      rules: [{ policy: 'api', key: 'ip' }],
    })
    // @ts-expect-error cots is not a route option (cost is)
    expect(() => http.prepare({ cots: 5 })).toThrow("did you mean 'cost'?")
  })

  it('Fastify route config: `satisfies RouteOptions` rejects a typo; the bare literal is refused at registration', async () => {
    const policies = { api: { algorithm: 'gcra', limit: 10, window: '1s' } } as const
    const http = createHttpLimiter({
      limiter: createLimiter({ policies }),
      rules: [{ policy: 'api', key: 'ip' }],
    })
    const app = Fastify()
    await app.register(sluiceFastify, { http })
    app.get('/ok', { config: { sluice: { cost: 2 } satisfies RouteOptions } }, async () => 'ok')
    // @ts-expect-error cots is not a route option (cost is)
    const typo = { cots: 5 } satisfies RouteOptions
    expect(typo).toEqual({ cots: 5 })
    // Fastify infers its ContextConfig type parameter from the config literal itself, so no
    // declaration of FastifyContextConfig.sluice can make this line a type error (see
    // docs/http.md); the plugin refuses it when the route is registered instead.
    await expect(async () => {
      app.post('/typo', { config: { sluice: { cots: 5 } } }, async () => 'ok')
      await app.ready()
    }).rejects.toThrow("route POST /typo config.sluice: unknown option 'cots'; did you mean 'cost'?")
    await app.close().catch(() => {})
  })
})
