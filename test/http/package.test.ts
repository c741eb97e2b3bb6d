// The adapters as a user gets them: the built subpaths `sluice/express|fastify|hono|node`, from ESM and
// CommonJS, resolved through package.json "exports" (needs `npm run build` first; `npm test` does it).
import { execFileSync } from 'node:child_process'
import { describe, expect, it } from 'vitest'

const root = new URL('../..', import.meta.url).pathname

function run(args: string[], code: string): string {
  return execFileSync(process.execPath, [...args, code], { cwd: root, encoding: 'utf8', timeout: 20_000 })
}

describe('sluice/* subpath exports', () => {
  it('load from ESM and answer a real request through sluice/node', () => {
    const out = run(
      ['--input-type=module', '-e'],
      `
      import { createServer } from 'node:http'
      import { createLimiter, createHttpLimiter } from 'sluice'
      import { withSluice } from 'sluice/node'
      import { sluice as express } from 'sluice/express'
      import { sluice as fastify } from 'sluice/fastify'
      import { sluice as hono } from 'sluice/hono'
      const limiter = createLimiter({ policies: { one: { algorithm: 'fixed-window', limit: 1, window: '1m' } } })
      const http = createHttpLimiter({ limiter, rules: [{ policy: 'one', key: 'ip' }] })
      const server = createServer(withSluice(http, (req, res) => res.end('ok'))).listen(0, '127.0.0.1', async () => {
        const url = 'http://127.0.0.1:' + server.address().port + '/'
        const a = await fetch(url); const b = await fetch(url)
        console.log([typeof express, typeof fastify, typeof hono, a.status, b.status, b.headers.get('retry-after') !== null].join(','))
        server.close()
      })`,
    )
    expect(out.trim()).toBe('function,function,function,200,429,true')
  })

  it('load from CommonJS', () => {
    const out = run(
      ['-e'],
      `console.log(['express', 'fastify', 'hono', 'node'].map((n) => Object.keys(require('sluice/' + n)).sort().join('+')).join(' '))`,
    )
    expect(out.trim()).toBe('sluice default+sluice sluice nodeRequest+sendOutcome+withSluice')
  })
})
