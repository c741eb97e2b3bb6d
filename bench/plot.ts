// Cost vs scale: measures Sluice's decisions/s as the key space grows (10^3..10^6 keys) and as
// in-flight requests grow (1..512), on a private redis-server, and writes docs/scale-cost.svg (plus
// the numbers as docs/scale-cost.json). Run: node --import tsx bench/plot.ts [--quick | --replot]
import { readFile, writeFile } from 'node:fs/promises'
import { Redis } from 'ioredis'
import { RateLimiterRedis } from 'rate-limiter-flexible'
import { createLimiter } from '../packages/sluice/src/limiter.js'
import { memoryStore } from '../packages/sluice/src/stores/memory.js'
import { redisStore } from '../packages/sluice/src/stores/redis/index.js'
import { startRedis } from '../test/helpers/redis-harness.js'
import { benchFailover } from './cases/scale.js'
import { throughput } from './throughput.js'

const quick = process.argv.includes('--quick')
const ms = quick ? 500 : 1500
const KEY_COUNTS = [1_000, 10_000, 100_000, 1_000_000]
const IN_FLIGHT = [1, 4, 16, 64, 256, 512]

interface Series {
  name: string
  points: { x: number; y: number }[]
}

const keySpace = (n: number) => Array.from({ length: n }, (_, i) => `k${i}`)

/** A line chart with a log2/log10 x axis and a linear y axis, as an SVG string. */
function chart(title: string, xLabel: string, yLabel: string, series: Series[], left: number): string {
  const w = 440
  const h = 300
  const pad = { l: 70, r: 20, t: 30, b: 45 }
  const xs = series.flatMap((s) => s.points.map((p) => Math.log10(p.x)))
  const ys = series.flatMap((s) => s.points.map((p) => p.y))
  const [x0, x1] = [Math.min(...xs), Math.max(...xs)]
  const y1 = Math.max(...ys) * 1.1
  const px = (x: number) => left + pad.l + ((Math.log10(x) - x0) / (x1 - x0 || 1)) * (w - pad.l - pad.r)
  const py = (y: number) => pad.t + (1 - y / y1) * (h - pad.t - pad.b)
  const colors = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd']
  const parts: string[] = [
    `<text x="${left + w / 2}" y="18" text-anchor="middle" font-size="14">${title}</text>`,
    `<line x1="${left + pad.l}" y1="${h - pad.b}" x2="${left + w - pad.r}" y2="${h - pad.b}" stroke="#333"/>`,
    `<line x1="${left + pad.l}" y1="${pad.t}" x2="${left + pad.l}" y2="${h - pad.b}" stroke="#333"/>`,
    `<text x="${left + w / 2}" y="${h - 8}" text-anchor="middle" font-size="12">${xLabel}</text>`,
    `<text x="${left + 14}" y="${h / 2}" text-anchor="middle" font-size="12" transform="rotate(-90 ${left + 14} ${h / 2})">${yLabel}</text>`,
  ]
  for (let i = 0; i <= 4; i++) {
    const y = (y1 * i) / 4
    parts.push(
      `<text x="${left + pad.l - 6}" y="${py(y) + 4}" text-anchor="end" font-size="10">${Math.round(y).toLocaleString('en-US')}</text>`,
      `<line x1="${left + pad.l}" y1="${py(y)}" x2="${left + w - pad.r}" y2="${py(y)}" stroke="#ddd"/>`,
    )
  }
  for (const p of series[0]?.points ?? [])
    parts.push(
      `<text x="${px(p.x)}" y="${h - pad.b + 14}" text-anchor="middle" font-size="10">${p.x.toLocaleString('en-US')}</text>`,
    )
  series.forEach((s, i) => {
    const color = colors[i % colors.length]!
    const d = s.points
      .map((p, j) => `${j === 0 ? 'M' : 'L'}${px(p.x).toFixed(1)},${py(p.y).toFixed(1)}`)
      .join(' ')
    parts.push(`<path d="${d}" fill="none" stroke="${color}" stroke-width="2"/>`)
    for (const p of s.points)
      parts.push(`<circle cx="${px(p.x).toFixed(1)}" cy="${py(p.y).toFixed(1)}" r="3" fill="${color}"/>`)
    parts.push(
      `<text x="${left + pad.l + 10}" y="${pad.t + 14 + i * 14}" font-size="11" fill="${color}">${s.name}</text>`,
    )
  })
  return parts.join('\n')
}

/** The SVG: decisions/s vs keys (Redis only: the memory store is 30x higher and would flatten it) and vs in-flight. */
function render(byKeys: Series[], byInFlight: Series[]): string {
  return [
    '<svg xmlns="http://www.w3.org/2000/svg" width="900" height="320" font-family="sans-serif">',
    '<title>Sluice over Redis: decisions per second vs distinct keys and vs requests in flight</title>',
    '<rect width="900" height="320" fill="white"/>',
    chart(
      'Redis decisions/s vs keys (log scale)',
      'distinct keys',
      'decisions/s',
      byKeys.filter((s) => s.name.includes('redis')),
      0,
    ),
    chart('Redis decisions/s vs in-flight requests', 'requests in flight', 'decisions/s', byInFlight, 450),
    '</svg>',
  ].join('\n')
}

const svgUrl = new URL('../docs/scale-cost.svg', import.meta.url)
const jsonUrl = new URL('../docs/scale-cost.json', import.meta.url)
if (process.argv.includes('--replot')) {
  // Redraw from the last measurement without measuring again.
  const data = JSON.parse(await readFile(jsonUrl, 'utf8')) as { byKeys: Series[]; byInFlight: Series[] }
  await writeFile(svgUrl, `${render(data.byKeys, data.byInFlight)}\n`)
  process.exit(0)
}

const server = await startRedis()
const client = new Redis(server.port, '127.0.0.1')
try {
  const policies = { api: { algorithm: 'token-bucket', limit: 100_000_000, window: '1h' } } as const
  const redisLimiter = createLimiter({ ...benchFailover, store: redisStore(client), policies })
  const memoryLimiter = createLimiter({ store: memoryStore(), policies })
  const rlf = new RateLimiterRedis({ storeClient: client, points: 1e8, duration: 3600, keyPrefix: 'rlf' })
  const byKeys: Series[] = [
    { name: 'sluice redis consume @64', points: [] },
    { name: 'sluice memory consume @64', points: [] },
  ]
  for (const n of KEY_COUNTS) {
    const keys = keySpace(n)
    process.stderr.write(`keys ${n}... `)
    byKeys[0]!.points.push({
      x: n,
      y: (await throughput((k) => redisLimiter.consume('api', k), 64, ms, keys)).rate,
    })
    byKeys[1]!.points.push({
      x: n,
      y: (await throughput((k) => memoryLimiter.consume('api', k), 64, ms, keys)).rate,
    })
  }
  const keys = keySpace(10_000)
  const byInFlight: Series[] = [
    { name: 'sluice redis consume (10^4 keys)', points: [] },
    { name: 'rate-limiter-flexible Redis', points: [] },
  ]
  for (const n of IN_FLIGHT) {
    process.stderr.write(`in flight ${n}... `)
    byInFlight[0]!.points.push({
      x: n,
      y: (await throughput((k) => redisLimiter.consume('api', k), n, ms, keys)).rate,
    })
    byInFlight[1]!.points.push({ x: n, y: (await throughput((k) => rlf.consume(k), n, ms, keys)).rate })
  }
  process.stderr.write('\n')
  const svg = render(byKeys, byInFlight)
  await writeFile(svgUrl, `${svg}\n`)
  const data = { node: process.version, date: new Date().toISOString(), quick, byKeys, byInFlight }
  await writeFile(jsonUrl, `${JSON.stringify(data, null, 2)}\n`)
  for (const s of [...byKeys, ...byInFlight])
    console.log(`${s.name}: ${s.points.map((p) => `${p.x}: ${Math.round(p.y)}/s`).join(', ')}`)
} finally {
  client.disconnect()
  await server.stop()
}
