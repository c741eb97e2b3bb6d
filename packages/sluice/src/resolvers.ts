// A promise and its resolving functions, without a closure made per promise: `new Promise` runs its
// executor at once, so one shared executor hands the functions over. For the paths that make a
// promise per remote decision (the failover layer, the Redis store's coalescer).

type Resolve = (value: never) => void
type Reject = (error: unknown) => void

let resolveTaken: Resolve | undefined
let rejectTaken: Reject | undefined

function take(resolve: Resolve, reject: Reject): void {
  resolveTaken = resolve
  rejectTaken = reject
}

/** Resolving functions of the promise `promiseWithResolvers` made last, handed over once. */
export interface Resolvers<T> {
  resolve: (value: T | PromiseLike<T>) => void
  reject: (error: unknown) => void
}

/**
 * A new promise; its resolving functions go to `into(resolve, reject)` at once. `into` is a
 * function the caller keeps (a method, a module function), not a closure made per call.
 * @example const p = promiseWith<number>(); const resolve = takenResolve<number>(); const reject = takenReject()
 */
export function promiseWith<T>(): Promise<T> {
  return new Promise<T>(take)
}

/** The resolve function of the promise promiseWith made last (call it once, right after). */
export function takenResolve<T>(): (value: T | PromiseLike<T>) => void {
  const resolve = resolveTaken!
  resolveTaken = undefined
  return resolve as (value: T | PromiseLike<T>) => void
}

/** The reject function of the promise promiseWith made last (call it once, right after). */
export function takenReject(): (error: unknown) => void {
  const reject = rejectTaken!
  rejectTaken = undefined
  return reject
}
