// How the envoy bench case reads h2load's output: its `failed` count already holds the errored and
// timed-out requests, and a status code counted for a request still in flight at the end is no
// failure and hides none.
import { describe, expect, it } from 'vitest'
import { h2loadResult } from '../../bench/cases/envoy.js'

const output = (requests: string, codes: string) => `starting benchmark...
finished in 2.00s, 42416.00 req/s, 3.00MB/s
requests: ${requests}
status codes: ${codes}
traffic: 6.00MB (6291456) total, 1.00MB (1048576) headers (space savings 90.00%), 2.00MB (2097152) data
`

describe('h2loadResult', () => {
  it('reads done and calls/s, and no failure when requests in flight at the end had their 2xx counted', () => {
    const r = h2loadResult(
      output(
        '84832 total, 84896 started, 84832 done, 84832 succeeded, 0 failed, 0 errored, 0 timeout',
        '84864 2xx, 0 3xx, 0 4xx, 0 5xx',
      ),
    )
    expect(r).toEqual({ done: 84832, perSecond: 42416, failed: 0 })
  })

  it('counts errored and timed-out requests once, as part of failed, beside the 4xx and 5xx', () => {
    const r = h2loadResult(
      output(
        '1000 total, 1064 started, 1000 done, 990 succeeded, 10 failed, 6 errored, 2 timeout',
        '1020 2xx, 0 3xx, 3 4xx, 1 5xx',
      ),
    )
    expect(r.failed).toBe(10)
  })

  it('counts 3xx answers as failed, which h2load calls successes', () => {
    const r = h2loadResult(
      output(
        '1000 total, 1000 started, 1000 done, 1000 succeeded, 0 failed, 0 errored, 0 timeout',
        '995 2xx, 5 3xx, 0 4xx, 0 5xx',
      ),
    )
    expect(r.failed).toBe(5)
  })

  it('throws on output it cannot read, quoting it', () => {
    expect(() => h2loadResult('no such thing')).toThrow(/unexpected h2load output:\nno such thing/)
  })
})
