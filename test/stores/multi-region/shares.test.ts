// The share computation of multiRegionStore (src/stores/multi-region/shares.ts): equal starting
// shares, shares from the regions' ledgers, hand-overs that keep what a region used, and a
// fake-clock run of three regions whose views of each other lag by a link delay, as the exchange
// has them: the regions never admit more than the limit together, and an idle region's share
// reaches the busy one within three of its sync periods.
import { describe, expect, it } from 'vitest'
import {
  applyGive,
  baseShares,
  EMPTY_LEDGER,
  type Ledger,
  planGive,
  sharesOf,
  targetsOf,
} from '../../../packages/sluice/src/stores/multi-region/shares.js'

const REGIONS = ['eu', 'us', 'ap']
const ledger = (given: Record<string, number>, version = 1): Ledger => ({
  version,
  given: new Map(Object.entries(given)),
})

describe('shares of a global limit', () => {
  it('start equal, the remainder one unit apiece in name order', () => {
    expect(Object.fromEntries(baseShares(300, REGIONS))).toEqual({ ap: 100, eu: 100, us: 100 })
    expect(Object.fromEntries(baseShares(1000, REGIONS))).toEqual({ ap: 334, eu: 333, us: 333 })
    expect(Object.fromEntries(baseShares(5, ['us', 'eu']))).toEqual({ eu: 3, us: 2 })
  })

  it('follow the ledgers, summing to the limit; a receiver that has not read a giver sees less, never more', () => {
    const ledgers = new Map([
      ['us', ledger({ eu: 60 })],
      ['ap', ledger({ eu: 100 })],
    ])
    const shares = sharesOf(300, REGIONS, ledgers)
    expect(Object.fromEntries(shares)).toEqual({ ap: 0, eu: 260, us: 40 })
    expect([...shares.values()].reduce((a, b) => a + b)).toBe(300)
    // eu before it has read ap's ledger: ap has already lowered its own share.
    expect(sharesOf(300, REGIONS, new Map([['us', ledger({ eu: 60 })]])).get('eu')).toBe(160)
  })

  it('targets follow demand; no demand anywhere moves nothing', () => {
    expect(Object.fromEntries(targetsOf(300, REGIONS, new Map([['eu', 40]]))!)).toEqual({
      ap: 0,
      eu: 300,
      us: 0,
    })
    expect(
      Object.fromEntries(
        targetsOf(
          300,
          REGIONS,
          new Map([
            ['eu', 30],
            ['us', 10],
          ]),
        )!,
      ),
    ).toEqual({
      ap: 0,
      eu: 225,
      us: 75,
    })
    expect(targetsOf(300, REGIONS, new Map())).toBeUndefined()
  })

  it('an idle region hands its unused share to the busy ones in proportion to what they lack', () => {
    const plan = planGive({
      self: 'ap',
      limit: 300,
      regions: REGIONS,
      ledgers: new Map(),
      demand: new Map([
        ['eu', 30],
        ['us', 10],
      ]),
      usedUnits: 0,
      minUnits: 3,
    })
    // eu lacks 125, us 0 (75 wanted, 100 held): all 100 to eu.
    expect(plan).toEqual({ to: new Map([['eu', 100]]), version: 0 })
    const split = planGive({
      self: 'ap',
      limit: 300,
      regions: REGIONS,
      ledgers: new Map(),
      demand: new Map([
        ['eu', 20],
        ['us', 20],
      ]),
      usedUnits: 10,
      minUnits: 3,
    })
    // 90 unused (10 used stay with ap), eu and us lack 50 each.
    expect(split).toEqual({
      to: new Map([
        ['eu', 45],
        ['us', 45],
      ]),
      version: 0,
    })
  })

  it('never hands over what the region used, what it wants itself, or a surplus under minUnits', () => {
    const base = { self: 'ap', limit: 300, regions: REGIONS, ledgers: new Map<string, Ledger>(), minUnits: 3 }
    const busyEu = new Map([['eu', 50]])
    expect(planGive({ ...base, demand: busyEu, usedUnits: 100 })).toBeUndefined()
    expect(planGive({ ...base, demand: busyEu, usedUnits: 98.5 })).toBeUndefined()
    expect(planGive({ ...base, demand: busyEu, usedUnits: 96 })).toEqual({
      to: new Map([['eu', 4]]),
      version: 0,
    })
    // Demand everywhere alike: every region wants its own share; nothing moves.
    const even = new Map(REGIONS.map((r) => [r, 40]))
    expect(planGive({ ...base, demand: even, usedUnits: 0 })).toBeUndefined()
    expect(planGive({ ...base, demand: new Map(), usedUnits: 0 })).toBeUndefined()
    // The plan carries the version it was made on; applying it raises the version.
    const ledgers = new Map([['ap', ledger({ eu: 10 }, 4)]])
    const plan = planGive({ ...base, ledgers, demand: busyEu, usedUnits: 0 })!
    expect(plan).toEqual({ to: new Map([['eu', 90]]), version: 4 })
    expect(applyGive(ledgers.get('ap')!, plan)).toEqual(ledger({ eu: 100 }, 5))
    expect(applyGive(EMPTY_LEDGER, plan).version).toBe(1)
  })
})

/**
 * Three regions on a fake clock (1 ms steps). Each syncs every `syncMs` (phases apart): it publishes
 * its demand, reads the others' demand and ledgers as they stood one link delay later, applies them
 * one more link delay later, then hands over (its own ledger changes at once). Between syncs each
 * region admits what its share allows, one request per ms per busy region.
 */
function simulate(options: {
  limit: number
  syncMs: number
  oneWayMs: number
  busy: readonly string[]
  durationMs: number
}) {
  const { limit, syncMs, oneWayMs } = options
  type Published = { at: number; ledger: Ledger; demand: number }
  const history = new Map(
    REGIONS.map((r) => [r, [{ at: 0, ledger: EMPTY_LEDGER, demand: 0 }] as Published[]]),
  )
  const asOf = (r: string, t: number) =>
    history
      .get(r)!
      .filter((p) => p.at <= t)
      .at(-1)!
  const state = new Map(
    REGIONS.map((r, i) => [
      r,
      {
        admitted: 0,
        asked: 0,
        ledgers: new Map<string, Ledger>(),
        demand: new Map<string, number>(),
        nextSync: 1 + Math.floor((i * syncMs) / REGIONS.length),
        pending: undefined as { applyAt: number; readAt: number } | undefined,
        syncs: 0,
        shareBySync: [] as number[],
        /** Index in shareBySync of the first sync that published a demand. */
        firstDemandSync: -1,
      },
    ]),
  )
  let worstTotal = 0
  for (let now = 1; now <= options.durationMs; now++) {
    for (const r of REGIONS) {
      const s = state.get(r)!
      const own = () => s.ledgers.get(r) ?? EMPTY_LEDGER
      if (s.pending !== undefined && now >= s.pending.applyAt) {
        const readAt = s.pending.readAt
        for (const q of REGIONS) {
          if (q === r) continue
          const seen = asOf(q, readAt)
          s.ledgers.set(q, seen.ledger)
          s.demand.set(q, seen.demand)
        }
        s.demand.set(r, asOf(r, now).demand)
        const plan = planGive({
          self: r,
          limit,
          regions: REGIONS,
          ledgers: s.ledgers,
          demand: s.demand,
          usedUnits: s.admitted,
          minUnits: Math.ceil(limit / 100),
        })
        if (plan !== undefined) {
          s.ledgers.set(r, applyGive(own(), plan))
          history.get(r)!.push({ at: now, ledger: own(), demand: asOf(r, now).demand })
        }
        s.pending = undefined
        s.syncs++
        s.shareBySync.push(sharesOf(limit, REGIONS, s.ledgers).get(r)!)
      }
      if (s.pending === undefined && now >= s.nextSync) {
        // Flush: the demand of the last period, then the pull's request leaves.
        history.get(r)!.push({ at: now, ledger: own(), demand: s.asked })
        if (s.asked > 0 && s.firstDemandSync < 0) s.firstDemandSync = s.syncs
        s.asked = 0
        s.pending = { readAt: now + oneWayMs, applyAt: now + 2 * oneWayMs }
        while (s.nextSync <= now) s.nextSync += syncMs
      }
      if (options.busy.includes(r)) {
        s.asked++
        if (s.admitted < sharesOf(limit, REGIONS, s.ledgers).get(r)!) s.admitted++
      }
    }
    const total = REGIONS.reduce((sum, r) => sum + state.get(r)!.admitted, 0)
    worstTotal = Math.max(worstTotal, total)
  }
  return { state, worstTotal }
}

describe('three regions on a fake clock', () => {
  for (const oneWayMs of [10, 40, 90]) {
    it(`a synchronized burst never admits past the limit (link ${oneWayMs} ms one way)`, () => {
      const { state, worstTotal } = simulate({
        limit: 300,
        syncMs: 100,
        oneWayMs,
        busy: REGIONS,
        durationMs: 3000,
      })
      expect(worstTotal).toBe(300)
      for (const r of REGIONS) expect(state.get(r)!.admitted).toBeGreaterThan(0)
    })

    it(`one busy region, two idle: its share reaches 90% of the limit by its third sync (link ${oneWayMs} ms)`, () => {
      const { state, worstTotal } = simulate({
        limit: 300,
        syncMs: 100,
        oneWayMs,
        busy: ['eu'],
        durationMs: 2000,
      })
      const eu = state.get('eu')!
      // Its first sync publishes its demand; the idle regions hand over at their next syncs.
      expect(eu.firstDemandSync).toBeGreaterThanOrEqual(0)
      const third = eu.shareBySync[eu.firstDemandSync + 2]
      expect(third, JSON.stringify(eu.shareBySync)).toBeGreaterThanOrEqual(270)
      // Not sooner than the idle regions can have read its demand: the rule is not vacuous.
      expect(eu.shareBySync[eu.firstDemandSync], JSON.stringify(eu.shareBySync)).toBe(100)
      expect(eu.admitted).toBe(300)
      expect(worstTotal).toBe(300)
    })
  }
})
