// A tiny node:http server mounting the observability handlers the way the service or a user would.
import type { Server } from 'node:http'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Observability } from '../../packages/sluice/src/metrics/observability.js'

export interface Mounted {
  server: Server
  url: string
  close(): Promise<void>
}

/** `/metrics` -> metricsHandler, anything else -> dashboardHandler; listens on 127.0.0.1, port 0. */
export async function mount(obs: Observability): Promise<Mounted> {
  const server = createServer((req, res) => {
    if (req.url === '/metrics') obs.metricsHandler(req, res)
    else obs.dashboardHandler(req, res)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return {
    server,
    url: `http://127.0.0.1:${port}`,
    async close() {
      obs.close() // ends SSE streams, so the server can close
      server.closeAllConnections()
      await new Promise<void>((resolve, reject) => server.close((e) => (e ? reject(e) : resolve())))
    },
  }
}
