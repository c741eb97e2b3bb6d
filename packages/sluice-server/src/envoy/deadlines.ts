// The deadlines of the gRPC listener's open calls, without a Node timer per call. Calls of one
// timeout expire in the order they began, so each timeout keeps its calls in a list in that order
// and one timer set for the first of them; a call leaves its list in O(1) when its stream closes.
// The timer is not cleared when its list empties (a call arriving next would set it again): it
// fires, finds nothing due, and is set again only for a call still open. Unlike the library's
// failover deadlines (one timeout, calls settled nearly in the order made, dropped from the front),
// a gRPC call may stay open for its whole timeout (a client that stops reading): the calls that
// ended after it leave the list at once rather than wait behind it with their streams.
/** One tracked call: its place in its list, and when it is due (the global performance.now(), ms). */
export interface Tracked {
  deadlineList: DeadlineList | undefined
  previous: Tracked | undefined
  next: Tracked | undefined
  dueAt: number
}

interface DeadlineList {
  readonly timeoutMs: number
  first: Tracked | undefined
  last: Tracked | undefined
  /** Set while the list may hold a call; fires for its first one. */
  timer: NodeJS.Timeout | undefined
}

export interface Deadlines<Call extends Tracked> {
  /** Expire `call` after `timeoutMs` unless it is dropped first. */
  track(call: Call, timeoutMs: number): void
  /** The call ended: it no longer expires. Nothing happens for a call not tracked. */
  drop(call: Call): void
}

/**
 * Deadlines that call `expire` for each call still tracked when its timeout has passed (after
 * the call has left its list). Timers are unreferenced: open calls hold a connection, which
 * keeps the process alive by itself.
 */
export function deadlines<Call extends Tracked>(expire: (call: Call) => void): Deadlines<Call> {
  /** One list per timeout in use; a list is forgotten when its timer finds it empty. */
  const lists = new Map<number, DeadlineList>()

  function unlink(call: Tracked): void {
    const list = call.deadlineList
    if (list === undefined) return
    if (call.previous === undefined) list.first = call.next
    else call.previous.next = call.next
    if (call.next === undefined) list.last = call.previous
    else call.next.previous = call.previous
    call.deadlineList = undefined
    call.previous = undefined
    call.next = undefined
  }

  function fire(list: DeadlineList): void {
    list.timer = undefined
    const now = performance.now()
    for (let call = list.first; call !== undefined && call.dueAt <= now; call = list.first) {
      unlink(call)
      expire(call as Call)
    }
    if (list.first === undefined) {
      lists.delete(list.timeoutMs)
      return
    }
    arm(list, list.first.dueAt - now)
  }

  function arm(list: DeadlineList, delayMs: number): void {
    // A timer fires no sooner than 1 ms after it is set; one due within that fires then.
    list.timer = setTimeout(fire, Math.max(1, Math.ceil(delayMs)), list)
    list.timer.unref()
  }

  return {
    track(call, timeoutMs) {
      let list = lists.get(timeoutMs)
      if (list === undefined) {
        list = { timeoutMs, first: undefined, last: undefined, timer: undefined }
        lists.set(timeoutMs, list)
      }
      call.dueAt = performance.now() + timeoutMs
      call.deadlineList = list
      call.previous = list.last
      call.next = undefined
      if (list.last === undefined) list.first = call
      else list.last.next = call
      list.last = call
      if (list.timer === undefined) arm(list, timeoutMs)
    },
    drop: unlink,
  }
}
