// The plpgsql rules around the algorithms are written once in the schema: one place picks an
// algorithm's function (step), and that place also applies the block rule, for the single-step
// path, the layered path and refunds alike. Their behaviour is the conformance suite's
// (test/conformance/postgres.test.ts); this pins where they are written.
import { describe, expect, it } from 'vitest'
import { ALGORITHMS } from '../../../packages/sluice/src/policy.js'
import { postgresSchemaSql } from '../../../packages/sluice/src/stores/postgres/schema.js'

const sql = postgresSchemaSql('sluice_limits')
const count = (text: string) => sql.split(text).length - 1

describe('postgres schema: the rules once', () => {
  it('picks each algorithm in one CASE', () => {
    for (const algorithm of ALGORITHMS) expect(count(`WHEN '${algorithm}' THEN`), algorithm).toBe(1)
  })

  it('answers a step under a block in one place', () => {
    expect(count('greatest(r.blocked_until - now_ms, o.reset_ms)')).toBe(1)
    expect(count('greatest(r.blocked_until - now_ms, o.retry_ms)')).toBe(1)
  })
})
