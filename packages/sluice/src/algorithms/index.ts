// The algorithm table: name -> pure transition. Stores look algorithms up here and nowhere else.
import type { AlgorithmName } from '../policy.js'
import { concurrency } from './concurrency.js'
import { fixedWindow } from './fixed-window.js'
import { gcra } from './gcra.js'
import { slidingWindowCounter } from './sliding-window-counter.js'
import { slidingWindowLog } from './sliding-window-log.js'
import { tokenBucket } from './token-bucket.js'
import type { Algorithm } from './types.js'

export type { ConcurrencyState, Lease } from './concurrency.js'
export type { FixedWindowState } from './fixed-window.js'
export type { GcraState } from './gcra.js'
export type { SlidingWindowCounterState } from './sliding-window-counter.js'
export type { SlidingWindowLogState } from './sliding-window-log.js'
export type { TokenBucketState } from './token-bucket.js'
export type { Algorithm, Outcome } from './types.js'

export const algorithms: Readonly<Record<AlgorithmName, Algorithm<unknown>>> = Object.freeze({
  'fixed-window': fixedWindow as Algorithm<unknown>,
  'sliding-window-log': slidingWindowLog as Algorithm<unknown>,
  'sliding-window-counter': slidingWindowCounter as Algorithm<unknown>,
  'token-bucket': tokenBucket as Algorithm<unknown>,
  gcra: gcra as Algorithm<unknown>,
  concurrency: concurrency as Algorithm<unknown>,
})
