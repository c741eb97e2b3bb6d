// The attribution of bench/envoy-perf.ts: `perf script` call chains read into stacks, and each stack
// given to garbage collection, the innermost JavaScript function's owner, or native work.
import { describe, expect, it } from 'vitest'
import { partOf } from '../../bench/envoy-perf.js'
import { parseScript } from '../../bench/perf.js'

const SCRIPT = `23508 
\t         15435f7 Builtins_FindOrderedHashSetEntry (/usr/bin/node)
\t    7fdef414b3a0 JS:*plan file:///w/packages/sluice-server/dist/chunk-A.js:2509:14 (JIT code map)
\t    7fdef4175df7 JS:*endReadableNT node:internal/streams/readable:1692:23 (JIT code map)
\t          c494db v8::internal::(anonymous namespace)::Invoke (/usr/bin/node)

23511 
\t          fdb7a0 v8::internal::Scavenger::ScavengePage (/usr/bin/node)

23508 
\t         1b390bd nghttp2_session_add_item (/usr/bin/node)
\t    7fdef413ac0c JS:*respond node:internal/http2/core:2792:10 (JIT code map)
\t    7fdef41307b6 JS:*respond file:///w/packages/sluice-server/dist/chunk-A.js:3716:17 (JIT code map)

23508 
\t         1b40b38 nghttp2_session_mem_recv2 (/usr/bin/node)
\t          8fe75f node::http2::Http2Session::OnStreamRead (/usr/bin/node)
\t         14c05fb uv__io_poll (/usr/bin/node)
`

describe('bench/envoy-perf.ts', () => {
  const stacks = parseScript(SCRIPT)

  it('reads each sample as its thread and its frames, innermost first, without addresses or objects', () => {
    expect(stacks.map((s) => s.tid)).toEqual([23508, 23511, 23508, 23508])
    expect(stacks[0]!.frames).toEqual([
      'Builtins_FindOrderedHashSetEntry',
      'JS:*plan file:///w/packages/sluice-server/dist/chunk-A.js:2509:14',
      'JS:*endReadableNT node:internal/streams/readable:1692:23',
      'v8::internal::(anonymous namespace)::Invoke',
    ])
  })

  it("gives a builtin to the innermost JavaScript function's owner, and a call into Node.js to Node.js", () => {
    expect(partOf(stacks[0]!.frames)).toMatch(/^the server's own JavaScript/)
    expect(partOf(stacks[2]!.frames)).toMatch(/^node:http2's and node:http's JavaScript/)
  })

  it('counts garbage collection on any thread as such, and native HTTP/2 work with no JavaScript apart', () => {
    expect(partOf(stacks[1]!.frames)).toMatch(/^garbage collection/)
    expect(partOf(stacks[3]!.frames)).toMatch(/^nghttp2 and Node.js's HTTP\/2 C\+\+/)
    expect(partOf(['_int_malloc'])).toMatch(/^no JavaScript or nghttp2 on the stack/)
    expect(partOf(['JS:*emit node:events:471:28'])).toMatch(/^Node.js's other JavaScript/)
  })
})
