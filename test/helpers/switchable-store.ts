// A Store whose behaviour the test switches at will: answer (through a real memory store), fail,
// or hang until released. Not a Redis mock: a contract test double for the protection layer,
// which must work the same over any asynchronous store.
import type { Step, StepResult, Store } from '../../packages/sluice/src/store.js'
import { memoryStore } from '../../packages/sluice/src/stores/memory.js'

export type Behaviour = 'answer' | 'fail' | 'hang'

export interface SwitchableStore extends Store {
  behaviour: Behaviour
  /** Calls that reached this store, by method. */
  readonly calls: { apply: number; refund: number; charge: number; block: number; reset: number }
  /** Calls currently hanging. */
  readonly hanging: number
  /** Settle every hanging call: answer, or fail (what a hung Redis does when its socket dies). */
  release(outcome: 'answer' | 'fail'): void
}

export function switchableStore(behaviour: Behaviour = 'answer', now?: () => number): SwitchableStore {
  const inner = now === undefined ? memoryStore() : memoryStore({ now })
  const calls = { apply: 0, refund: 0, charge: 0, block: 0, reset: 0 }
  let waiting: { run: () => void; fail: (e: Error) => void }[] = []

  function run<T>(method: keyof typeof calls, work: () => Promise<T>): Promise<T> {
    calls[method]++
    if (store.behaviour === 'fail') return Promise.reject(new Error('connection refused (test)'))
    if (store.behaviour === 'answer') return work()
    return new Promise<T>((resolve, reject) => {
      waiting.push({ run: () => work().then(resolve, reject), fail: reject })
    })
  }

  const store: SwitchableStore = {
    name: 'switchable',
    inProcess: false,
    now: inner.now,
    records: inner.records,
    behaviour,
    calls,
    get hanging() {
      return waiting.length
    },
    release(outcome) {
      const all = waiting
      waiting = []
      for (const w of all) {
        if (outcome === 'answer') w.run()
        else w.fail(new Error('socket closed (test)'))
      }
    },
    apply: (steps: readonly Step[], mode: 'consume' | 'peek'): Promise<StepResult[]> =>
      run('apply', async () => inner.apply(steps, mode)),
    refund: (steps) => run('refund', () => inner.refund(steps)),
    charge: (steps) => run('charge', () => inner.charge(steps)),
    block: (steps, ms) => run('block', () => inner.block(steps, ms)),
    reset: (steps) => run('reset', () => inner.reset(steps)),
    close: () => inner.close(),
  }
  return store
}
