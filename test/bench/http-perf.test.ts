// The attribution of bench/http-perf.ts: a sample goes to garbage collection, else to the owner of
// its innermost JavaScript function (the limiter, the framework, node:http or the rest of Node.js),
// else to native work.
import { describe, expect, it } from 'vitest'
import { memoryVariants, partOf } from '../../bench/http-perf.js'

describe('bench/http-perf.ts', () => {
  it("gives a builtin to the innermost JavaScript function's owner: Sluice's build and the peers' code are the limiter's", () => {
    expect(
      partOf([
        'Builtins_FindOrderedHashMapEntry',
        'JS:*applyOutcome file:///w/packages/sluice/dist/fastify.js:66:22',
      ]),
    ).toMatch(/^the limiter's own JavaScript/)
    expect(partOf(['JS:*applyRateLimit /w/node_modules/@fastify/rate-limit/index.js:245:31'])).toMatch(
      /^the limiter's own JavaScript/,
    )
    expect(partOf(['JS:*set /w/node_modules/toad-cache/dist/toad-cache.cjs:1:1'])).toMatch(
      /^the limiter's own JavaScript/,
    )
    expect(partOf(['JS:*increment file:///w/node_modules/express-rate-limit/dist/index.mjs:123:3'])).toMatch(
      /^the limiter's own JavaScript/,
    )
  })

  it("counts Fastify's own code and the handler as the framework's, and node:http's apart from the rest of Node.js", () => {
    expect(
      partOf([
        'Builtins_StringToLowerCaseIntl',
        'JS:*Reply.send /w/node_modules/fastify/lib/reply.js:156:33',
      ]),
    ).toMatch(/^the framework's JavaScript/)
    expect(partOf(['JS:~ file:///w/bench/cases/http-server.mjs:68:22'])).toMatch(
      /^the framework's JavaScript/,
    )
    expect(
      partOf(['RegExp:[^\\t\\x20-\\x7e\\x80-\\xff]', 'JS:*processHeader node:_http_outgoing:546:23']),
    ).toMatch(/^node:http's JavaScript/)
    expect(
      partOf(['tcp_sendmsg_locked', 'JS:*writevGeneric node:internal/stream_base_commons:122:24']),
    ).toMatch(/^Node.js's other JavaScript/)
  })

  it('counts garbage collection on any thread as such, and native work with no JavaScript apart', () => {
    expect(
      partOf(['v8::internal::Scavenger::ScavengePage', 'JS:*f file:///w/packages/sluice/dist/index.js:1:1']),
    ).toMatch(/^garbage collection/)
    expect(partOf(['llhttp__internal_execute', 'uv__io_poll'])).toMatch(/^no JavaScript on the stack/)
  })

  it("profiles the case's memory-store servers, the one without a limiter first", () => {
    expect(memoryVariants('fastify').map((v) => v.variant)).toEqual([
      'none',
      'sluice-memory',
      'sluice-memory-legacy',
      'fastify-rate-limit-memory',
      'header-lines-5',
      'header-lines-3',
    ])
    expect(memoryVariants('express').map((v) => v.variant)).toEqual([
      'none',
      'sluice-memory',
      'express-rate-limit-memory',
    ])
  })
})
