// Timeouts for calls that all have the same timeout: deadlines then come in the order the calls
// were made, so the calls in flight form a FIFO list and one timer, armed for the oldest unsettled
// deadline, replaces a setTimeout per call (src/failover/protect.ts, every remote decision).
// Deadlines are read on the clock the caller passes (protectStore's `now`), so that one clock
// decides timeouts, the breaker and the log interval, and tests can drive it with fake timers.

/** A call in flight. The list links it to the next younger call. */
export interface Deadline {
  /** The time on the deadlines' clock (ms) after which the call has timed out. */
  readonly deadline: number
  /** Answered, failed or timed out: nothing more to do. */
  settled: boolean
  next: Deadline | undefined
}

export interface Deadlines<T extends Deadline> {
  /** Add the youngest call (its deadline is the latest so far). */
  track(entry: T): void
  /** The call was answered before its deadline. */
  settle(entry: T): void
}

/**
 * `timedOut` is called once for each call whose deadline passes on `now` (a monotonic clock in ms)
 * before it is settled.
 */
export function createDeadlines<T extends Deadline>(
  timedOut: (entry: T) => void,
  now: () => number,
): Deadlines<T> {
  let oldest: Deadline | undefined
  let newest: Deadline | undefined
  let timer: NodeJS.Timeout | undefined

  function arm(deadline: number): void {
    timer = setTimeout(onTimer, Math.max(0, deadline - now()))
    timer.unref?.()
  }
  function onTimer(): void {
    // Decide in the check phase, after this loop iteration has polled the sockets: when our own
    // event loop was stalled, the reply may be waiting unread, and a stall of this process is no
    // failure of the store. `timer` stays set until then, so no call arms a second one.
    setImmediate(expire)
  }
  function expire(): void {
    timer = undefined
    // Timers have whole-ms resolution: a deadline within the next ms is due.
    const due = now() + 1
    while (oldest !== undefined && (oldest.settled || oldest.deadline <= due)) {
      const entry = oldest
      oldest = entry.next
      entry.next = undefined
      if (!entry.settled) {
        entry.settled = true
        timedOut(entry as T)
      }
    }
    if (oldest === undefined) newest = undefined
    else arm(oldest.deadline)
  }
  return {
    track(entry) {
      if (newest === undefined) oldest = entry
      else newest.next = entry
      newest = entry
      if (timer === undefined) arm(entry.deadline)
    },
    settle(entry) {
      entry.settled = true
      // Drop settled calls from the front, so the list holds what is in flight. A dropped call
      // keeps no link to the younger ones: a call promoted to V8's old generation while in flight
      // would otherwise keep each younger call alive through the scavenges after it is dead.
      while (oldest?.settled) {
        const entry = oldest
        oldest = entry.next
        entry.next = undefined
      }
      if (oldest === undefined) newest = undefined
    },
  }
}
