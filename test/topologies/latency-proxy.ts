// A TCP proxy on 127.0.0.1 that delays every chunk by `delayMs` each way (a link between regions)
// and can cut the link: open connections are dropped and new ones are held without an answer, as
// a partition looks to a client, until heal().
import { createConnection, createServer, type Socket } from 'node:net'

export interface LatencyProxy {
  readonly port: number
  cut(): void
  heal(): void
  close(): Promise<void>
}

export async function startLatencyProxy(targetPort: number, delayMs: number): Promise<LatencyProxy> {
  let cut = false
  const open = new Set<Socket>()
  /** Connections accepted while cut: held, never answered. */
  const held = new Set<Socket>()
  const delayed = (to: Socket) => (chunk: Buffer) => {
    // Equal delays fire in order: the byte stream stays in order.
    setTimeout(() => {
      if (!to.destroyed) to.write(chunk)
    }, delayMs)
  }
  const server = createServer((client) => {
    client.on('error', () => {})
    if (cut) {
      held.add(client)
      client.on('data', () => {})
      client.once('close', () => held.delete(client))
      return
    }
    const upstream = createConnection({ host: '127.0.0.1', port: targetPort })
    upstream.on('error', () => client.destroy())
    open.add(client)
    open.add(upstream)
    client.on('data', delayed(upstream))
    upstream.on('data', delayed(client))
    const end = () => {
      // Let data already delayed leave first.
      setTimeout(() => {
        client.destroy()
        upstream.destroy()
      }, delayMs)
    }
    client.once('close', () => {
      open.delete(client)
      end()
    })
    upstream.once('close', () => {
      open.delete(upstream)
      end()
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const address = server.address()
  if (address === null || typeof address === 'string') throw new Error('latency-proxy: no port')
  return {
    port: address.port,
    cut() {
      cut = true
      for (const s of open) s.destroy()
    },
    heal() {
      cut = false
      // Held connections are closed, so clients reconnect through the healed link.
      for (const s of held) s.destroy()
    },
    close() {
      for (const s of [...open, ...held]) s.destroy()
      return new Promise((resolve) => server.close(() => resolve()))
    },
  }
}
