// Whether a server's CPU per request depends on its place among servers kept running: N identical
// servers of the HTTP case (bench/cases/http-server.mjs, Fastify, one variant), all started at once
// and kept, each warmed up in turn, then measured in the same order for a few rounds. Prints each
// server's CPU per request (median over rounds) in the order they were first loaded. On the 2-core
// VM of docs/benchmarks.md the first four ran at one speed and every later one about a third slower,
// which is why the HTTP case now runs one server at a time.
//   node --import tsx bench/server-places.ts [--servers 8] [--rounds 3] [--variant sluice-memory]
// Needs the build (`npm run build`).
import { parseArgs } from 'node:util'
import { CONNECTIONS, measure, type Server, startServer, stopServer } from './cases/http.js'
import { load, median } from './load.js'

const { values } = parseArgs({
  options: {
    servers: { type: 'string', default: '8' },
    rounds: { type: 'string', default: '3' },
    variant: { type: 'string', default: 'sluice-memory' },
  },
})
const count = Number(values.servers)
const rounds = Number(values.rounds)
const servers: Server[] = []
try {
  // A memory-store server never connects to Redis: the port is not read.
  for (let i = 0; i < count; i++)
    servers.push(await startServer('fastify', values.variant, values.variant, 0))
  for (const server of servers) await load({ url: server.url, connections: CONNECTIONS, duration: 2 })
  const cpu = servers.map((): number[] => [])
  for (let round = 0; round < rounds; round++)
    for (const [i, server] of servers.entries()) cpu[i]!.push((await measure(server, 3)).cpuMicrosPerRequest)
  console.log(`| loaded | ${values.variant}: server CPU per request, median of ${rounds} rounds | rounds |`)
  console.log('| ---: | ---: | --- |')
  for (const [i, runs] of cpu.entries())
    console.log(`| ${i + 1} | ${median(runs).toFixed(1)} µs | ${runs.map((r) => r.toFixed(1)).join(', ')} |`)
} finally {
  for (const server of servers) await stopServer(server)
}
