// The one place tests take TCP ports for the servers they start: below 32768 (outside the ephemeral
// range that TIME-WAIT sockets hold), each with port + 10000 free too (a Redis Cluster node's bus),
// and never the same port, or another's bus port, twice in one test process.
import { createServer } from 'node:net'

const LOWEST = 10_000
const BUS_OFFSET = 10_000
/** The highest port whose bus port is still below 32768. */
const HIGHEST = 32_767 - BUS_OFFSET

/** Ports handed out in this process, and the bus port each one reserves. */
const taken = new Set<number>()

function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer()
    server.once('error', () => resolve(false))
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)))
  })
}

/**
 * A port free on 127.0.0.1 whose bus port (+10000) is free too; neither is handed out again by
 * this process, so a service and a cluster started by one test cannot be given each other's ports.
 */
export async function freePort(): Promise<number> {
  for (let attempt = 0; attempt < 200; attempt++) {
    const port = LOWEST + Math.floor(Math.random() * (HIGHEST - LOWEST + 1))
    if (taken.has(port) || taken.has(port + BUS_OFFSET)) continue
    if ((await portFree(port)) && (await portFree(port + BUS_OFFSET))) {
      taken.add(port)
      taken.add(port + BUS_OFFSET)
      return port
    }
  }
  throw new Error(`no free port found in ${LOWEST}-${HIGHEST}`)
}
