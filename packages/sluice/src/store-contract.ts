// `sluice/store`: what a store author writes against. The contract every store implements (one
// atomic step or several, peek, refund, block, reset, charge, now, close), the step a limiter hands
// it, and the policy as the store sees it, resolved to whole milliseconds.

export type { AlgorithmName, ResolvedPolicy } from './policy.js'
export type { MaybePromise, Step, StepResult, Store } from './store.js'
