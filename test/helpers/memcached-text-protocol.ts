// memcached's text protocol on a plain socket, for tests to look at items the way an operator
// would: `mg <key> t` (time to live), `lru_crawler metadump hash` (every key with its expiry).
import { connect } from 'node:net'

/** Send one command; resolve with the reply once it ends with `until`. */
export function textCommand(port: number, command: string, until: RegExp): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1')
    let reply = ''
    socket.setTimeout(3000, () => {
      socket.destroy()
      reject(new Error(`memcached ${command}: no complete reply: ${reply.slice(0, 200)}`))
    })
    socket.once('error', reject)
    socket.once('connect', () => socket.write(`${command}\r\n`))
    socket.on('data', (chunk) => {
      reply += chunk.toString('latin1')
      if (until.test(reply)) {
        socket.destroy()
        resolve(reply)
      }
    })
  })
}

/** Seconds to live of an item (-1: never expires), or undefined when there is none. */
export async function itemTtl(port: number, key: string): Promise<number | undefined> {
  const reply = await textCommand(port, `mg ${key} t`, /\r\n$/)
  if (reply.startsWith('EN')) return undefined
  const match = /^HD t(-?\d+)/.exec(reply)
  if (match === null) throw new Error(`mg: unexpected reply ${JSON.stringify(reply)}`)
  return Number(match[1])
}

/**
 * Every item key under `prefix` with its expiry (`exp`: Unix seconds, -1 never), from a metadump of
 * the hash table (memcached 1.6.9 and later). `metadump all` walks the LRUs instead, and an item
 * that moves between them while the crawl runs (one just written, on a busy server) can be missed.
 */
export async function dumpKeys(port: number, prefix: string): Promise<{ key: string; exp: number }[]> {
  let reply = ''
  // The crawler answers BUSY while another crawl (another test's dump, its own LRU maintenance)
  // runs: ask again, for a bounded time, rather than read that as "no items".
  const until = Date.now() + 10_000
  for (;;) {
    reply = await textCommand(
      port,
      'lru_crawler metadump hash',
      /(^|\n)(END|ERROR[^\r\n]*|BUSY[^\r\n]*)\r?\n$/,
    )
    if (/(^|\n)ERROR/.test(reply)) throw new Error(`lru_crawler metadump hash: ${reply.slice(-200)}`)
    if (!/(^|\n)BUSY/.test(reply)) break
    if (Date.now() > until) throw new Error('lru_crawler metadump hash: the crawler stayed busy for 10 s')
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  const out: { key: string; exp: number }[] = []
  for (const line of reply.split(/\r?\n/)) {
    const match = /^key=(\S+) exp=(-?\d+)/.exec(line)
    if (match === null) continue
    const key = decodeURIComponent(match[1]!)
    if (key.startsWith(`${prefix}:`)) out.push({ key, exp: Number(match[2]) })
  }
  return out
}
