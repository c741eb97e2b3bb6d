// Whether a server's CPU per request depends on its place among servers kept running: N identical
// servers of the HTTP case (bench/cases/http-server.mjs, Fastify, one variant), all started at once
// and kept, each warmed up in turn, then measured in the same order for a few rounds. Prints each
// server's CPU per request (median over rounds) in the order they were first loaded. On the 2-core
// VM of docs/benchmark-cases.md the first four loaded ran at one speed and every later one used about a
// quarter more CPU per request, which is why the HTTP case runs one server at a time.
//   node --import tsx bench/server-places.ts [--servers 8] [--rounds 3] [--variant sluice-memory]
//     [--reverse]        load them last started first (is it the order of starting or of loading?)
//     [--stop-first N]   stop the first N started before loading any (do idle survivors count?)
// Needs the build (`npm run build`).
import { parseArgs } from 'node:util'
import { CONNECTIONS, measure, type Server, startServer, stopServer } from './cases/http.js'
import { load, median } from './load.js'

const { values } = parseArgs({
  options: {
    servers: { type: 'string', default: '8' },
    rounds: { type: 'string', default: '3' },
    variant: { type: 'string', default: 'sluice-memory' },
    reverse: { type: 'boolean', default: false },
    'stop-first': { type: 'string', default: '0' },
  },
})
const count = Number(values.servers)
const rounds = Number(values.rounds)
const stopFirst = Number(values['stop-first'])
if (![count, rounds].every((n) => Number.isSafeInteger(n) && n >= 1))
  throw new Error('--servers and --rounds take a whole number of 1 or more')
if (!Number.isSafeInteger(stopFirst) || stopFirst < 0 || stopFirst >= count)
  throw new Error('--stop-first takes a whole number below --servers')
const started: Server[] = []
try {
  // A memory-store server never connects to Redis: the port is not read.
  for (let i = 0; i < count; i++)
    started.push(await startServer('fastify', values.variant, values.variant, 0))
  for (const server of started.slice(0, stopFirst)) await stopServer(server)
  const loaded = started.map((server, i) => ({ server, started: i + 1 })).slice(stopFirst)
  if (values.reverse) loaded.reverse()
  for (const { server } of loaded) await load({ url: server.url, connections: CONNECTIONS, duration: 2 })
  const cpu = loaded.map((): number[] => [])
  for (let round = 0; round < rounds; round++)
    for (const [i, { server }] of loaded.entries())
      cpu[i]!.push((await measure(server, 3)).cpuMicrosPerRequest)
  console.log(
    `| loaded | started | ${values.variant}: server CPU per request, median of ${rounds} rounds | rounds |`,
  )
  console.log('| ---: | ---: | ---: | --- |')
  for (const [i, runs] of cpu.entries())
    console.log(
      `| ${i + 1} | ${loaded[i]!.started} | ${median(runs).toFixed(1)} µs | ${runs.map((r) => r.toFixed(1)).join(', ')} |`,
    )
} finally {
  // stopServer returns at once for a server already stopped.
  for (const server of started) await stopServer(server)
}
