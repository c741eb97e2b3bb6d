// The conformance cases of a store's records (src/records.ts): what put, get, list, delete and
// version answer, expiry on the store's clock, bad input refused with nothing written. A store
// without records proves that it refuses every method with SLUICE_UNSUPPORTED.
import { SluiceError } from '../errors.js'
import { RECORD_KINDS, type StoreRecord, type StoreRecords } from '../records.js'
import type { Store } from '../store.js'
import { type ConformanceCase, ConformanceError, type StoreFactory } from './run.js'

const T0 = 1_700_000_000_000

function expectThat(condition: boolean, where: string, what: string): void {
  if (!condition) throw new ConformanceError(`records, ${where}: ${what}`)
}

const show = (value: unknown): string => JSON.stringify(value)

function expectRecord(
  actual: StoreRecord | undefined,
  expected: StoreRecord | undefined,
  where: string,
): void {
  expectThat(show(actual) === show(expected), where, `got ${show(actual)}, expected ${show(expected)}`)
}

const bySubject = (records: StoreRecord[]): StoreRecord[] =>
  [...records].sort((a, b) => (a.subject < b.subject ? -1 : a.subject > b.subject ? 1 : 0))

async function expectCode(work: () => Promise<unknown>, code: string, where: string): Promise<void> {
  let error: unknown
  try {
    await work()
  } catch (e) {
    error = e
  }
  const got = error instanceof SluiceError ? error.code : error === undefined ? 'no error' : String(error)
  expectThat(got === code, where, `rejected with ${got}, expected ${code}`)
}

type Body = (
  records: StoreRecords,
  store: Store,
  advance: (ms: number) => void,
  clockFollows: boolean,
) => Promise<void>

function withStore(makeStore: StoreFactory, body: Body): () => Promise<void> {
  return async () => {
    let clock = T0
    const store = await makeStore(() => clock)
    // A store on its own clock (a server's, or Date.now) cannot be moved by the case: expiry is
    // then checked only as far as the stated expiresAt.
    const clockFollows = store.now() === T0
    try {
      await body(
        store.records,
        store,
        (ms) => {
          clock += ms
        },
        clockFollows,
      )
    } finally {
      await store.close()
    }
  }
}

/** The records cases for the stores `makeStore` builds; `supported: false` checks the refusal instead. */
export function recordCases(makeStore: StoreFactory, supported: boolean): ConformanceCase[] {
  if (!supported)
    return [
      {
        name: 'records: a store without records refuses every method with SLUICE_UNSUPPORTED',
        run: withStore(makeStore, async (records) => {
          const code = 'SLUICE_UNSUPPORTED'
          await expectCode(() => records.put('override', 'p', 'k', 'v'), code, 'put')
          await expectCode(() => records.get('override', 'p', 'k'), code, 'get')
          await expectCode(() => records.list('override', 'p'), code, 'list')
          await expectCode(() => records.delete('override', 'p', 'k'), code, 'delete')
          await expectCode(() => records.version(), code, 'version')
        }),
      },
    ]
  return [
    {
      name: 'records: put, get, list and delete per (kind, policy), any subject text',
      run: withStore(makeStore, async (records) => {
        const odd = 'a:b{c}\u0000 é 😀 '
        expectRecord(await records.get('override', 'p', 'k'), undefined, 'get before any put')
        await records.put('override', 'p', 'k', '{"limit":5}')
        await records.put('override', 'p', odd, 'x:y')
        await records.put('override', 'q', 'k', 'other policy')
        for (const kind of RECORD_KINDS.filter((k) => k !== 'override'))
          await records.put(kind, 'p', 'k', `${kind} entry`)
        expectRecord(await records.get('override', 'p', 'k'), { subject: 'k', value: '{"limit":5}' }, 'get')
        expectRecord(
          await records.get('override', 'p', odd),
          { subject: odd, value: 'x:y' },
          'get, odd subject',
        )
        expectRecord(
          await records.get('override', 'q', 'k'),
          { subject: 'k', value: 'other policy' },
          'get, policy q',
        )
        expectRecord(
          await records.get('deny', 'p', 'k'),
          { subject: 'k', value: 'deny entry' },
          'get, kind deny',
        )
        const listed = bySubject(await records.list('override', 'p'))
        expectThat(
          show(listed) ===
            show(
              bySubject([
                { subject: 'k', value: '{"limit":5}' },
                { subject: odd, value: 'x:y' },
              ]),
            ),
          'list',
          `got ${show(listed)}`,
        )
        await records.put('override', 'p', 'k', 'replaced')
        expectRecord(
          await records.get('override', 'p', 'k'),
          { subject: 'k', value: 'replaced' },
          'get after a second put',
        )
        expectThat(
          (await records.list('override', 'p')).length === 2,
          'list after a second put',
          'not 2 records',
        )
        expectThat((await records.delete('override', 'p', 'k')) === true, 'delete', 'did not answer true')
        expectThat(
          (await records.delete('override', 'p', 'k')) === false,
          'delete again',
          'did not answer false',
        )
        expectRecord(await records.get('override', 'p', 'k'), undefined, 'get after delete')
        expectRecord(
          await records.get('override', 'q', 'k'),
          { subject: 'k', value: 'other policy' },
          'policy q kept',
        )
        expectRecord(
          await records.get('allow', 'p', 'k'),
          { subject: 'k', value: 'allow entry' },
          'kind allow kept',
        )
        expectThat(show(await records.list('override', 'none')) === '[]', 'list of an empty set', 'not []')
      }),
    },
    {
      name: 'records: the version changes with every put and every delete that removed one, never with a read',
      run: withStore(makeStore, async (records) => {
        const seen = new Set<string>()
        const fresh = async (where: string): Promise<void> => {
          const v = await records.version()
          expectThat(typeof v === 'string', where, `version ${show(v)} is not a string`)
          expectThat(!seen.has(v), where, `version ${show(v)} did not change`)
          seen.add(v)
        }
        await fresh('at start')
        await records.put('override', 'p', 'k', '1')
        await fresh('after a put')
        await records.put('override', 'p', 'k', '2')
        await fresh('after a put that replaced')
        const before = await records.version()
        await records.get('override', 'p', 'k')
        await records.list('override', 'p')
        expectThat((await records.delete('override', 'p', 'nobody')) === false, 'delete of none', 'not false')
        expectThat(
          (await records.version()) === before,
          'after reads and a delete of none',
          'the version changed',
        )
        await records.delete('override', 'p', 'k')
        await fresh('after a delete')
      }),
    },
    {
      name: 'records: a record with ttlMs expires by itself on the store clock',
      run: withStore(makeStore, async (records, store, advance, clockFollows) => {
        const before = store.now()
        await records.put('override', 'p', 'short', 'v', 1000)
        await records.put('override', 'p', 'forever', 'w')
        const after = store.now()
        const got = await records.get('override', 'p', 'short')
        const expiresAt = got?.expiresAt ?? 0
        expectThat(
          got?.value === 'v' && expiresAt >= before + 1000 && expiresAt <= after + 1000,
          'get before expiry',
          `got ${show(got)}, expected expiresAt ${before + 1000}`,
        )
        expectRecord(
          await records.get('override', 'p', 'forever'),
          { subject: 'forever', value: 'w' },
          'no ttl',
        )
        if (!clockFollows) return
        advance(999)
        expectThat(
          (await records.get('override', 'p', 'short')) !== undefined,
          'at 999 ms',
          'gone before its ttl',
        )
        expectThat((await records.list('override', 'p')).length === 2, 'list at 999 ms', 'not 2 records')
        advance(1)
        expectRecord(await records.get('override', 'p', 'short'), undefined, 'at 1000 ms')
        const listed = await records.list('override', 'p')
        expectThat(
          listed.length === 1 && listed[0]!.subject === 'forever',
          'list at 1000 ms',
          `got ${show(listed)}`,
        )
        await records.put('override', 'p', 'short', 'again')
        expectRecord(
          await records.get('override', 'p', 'short'),
          { subject: 'short', value: 'again' },
          'put again',
        )
      }),
    },
    {
      name: 'records: bad input is refused with a typed error and nothing is written',
      run: withStore(makeStore, async (records) => {
        const version = await records.version()
        const cases: [string, () => Promise<unknown>, string][] = [
          ['kind', () => records.put('overide' as never, 'p', 'k', 'v'), 'SLUICE_INVALID_OPTIONS'],
          ['policy id', () => records.put('override', 'p q', 'k', 'v'), 'SLUICE_INVALID_OPTIONS'],
          ['empty subject', () => records.put('override', 'p', '', 'v'), 'SLUICE_INVALID_KEY'],
          ['subject type', () => records.put('override', 'p', 5 as never, 'v'), 'SLUICE_INVALID_KEY'],
          ['lone surrogate', () => records.put('override', 'p', '\uD800', 'v'), 'SLUICE_INVALID_KEY'],
          ['value type', () => records.put('override', 'p', 'k', {} as never), 'SLUICE_INVALID_OPTIONS'],
          [
            'value length',
            () => records.put('override', 'p', 'k', 'v'.repeat(4097)),
            'SLUICE_INVALID_OPTIONS',
          ],
          ['ttl 0', () => records.put('override', 'p', 'k', 'v', 0), 'SLUICE_INVALID_DURATION'],
          ['ttl -1', () => records.put('override', 'p', 'k', 'v', -1), 'SLUICE_INVALID_DURATION'],
          ['ttl 1.5', () => records.put('override', 'p', 'k', 'v', 1.5), 'SLUICE_INVALID_DURATION'],
          [
            'ttl text',
            () => records.put('override', 'p', 'k', 'v', '1s' as never),
            'SLUICE_INVALID_DURATION',
          ],
          ['get kind', () => records.get('x' as never, 'p', 'k'), 'SLUICE_INVALID_OPTIONS'],
          ['list policy', () => records.list('override', ''), 'SLUICE_INVALID_OPTIONS'],
          ['delete subject', () => records.delete('override', 'p', ''), 'SLUICE_INVALID_KEY'],
        ]
        for (const [where, work, code] of cases) await expectCode(work, code, where)
        expectThat((await records.version()) === version, 'after bad input', 'the version changed')
        expectThat(
          show(await records.list('override', 'p')) === '[]',
          'after bad input',
          'something was written',
        )
      }),
    },
  ]
}
