// `sluice/store`: what a store author writes against. The contract every store implements (one
// atomic step or several, peek, refund, block, reset, charge, now, records, close), the step a limiter hands
// it, the policy as the store sees it (resolved to whole milliseconds), `forwardStore` for a store
// that wraps another, and the conformance suite every store Sluice ships passes, to run against a
// store of your own. `calendarPeriod` draws a calendar policy's period for a store that decides
// calendar windows in a language of its own.
export type { CalendarPeriod, CalendarSpec, CalendarUnit } from './calendar.js'
export { calendarPeriod } from './calendar.js'
export type { ConformanceCase, ConformanceOptions, StoreFactory } from './conformance/run.js'
export { ConformanceError, checkStore, conformanceCases } from './conformance/run.js'
export type { ExpectedResult, Vector, VectorStep } from './conformance/vectors.js'
export { vectors } from './conformance/vectors.js'
export type { CompiledList, CompiledLists, ListEntries } from './lists.js'
export type { AlgorithmName, ResolvedPolicy } from './policy.js'
export type { RecordKind, StoreRecord, StoreRecords } from './records.js'
export {
  MAX_RECORD_SUBJECT_LENGTH,
  MAX_RECORD_VALUE_LENGTH,
  MAX_RECORDS_PER_POLICY,
  RECORD_KINDS,
  unsupportedRecords,
} from './records.js'
export type { MaybePromise, Step, StepResult, Store, StoreChanges } from './store.js'
export { forwardStore } from './store.js'
