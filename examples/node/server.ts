// Plain node:http with layered limits and tiers: node --import tsx examples/node/server.ts
// Try: curl -i http://127.0.0.1:3000/users/1
import { createServer } from 'node:http'
import { createHttpLimiter } from 'sluice'
import { withSluice } from 'sluice/node'
import { options, port } from '../shared.js'

const http = createHttpLimiter({ ...options, routes: { 'POST /reports': { cost: 5 } } })

// node:http has no router: tell Sluice the route pattern so keys stay bounded.
function route(url: string | undefined): string | undefined {
  const path = (url ?? '/').split('?')[0] ?? '/'
  if (/^\/users\/[^/]+$/.test(path)) return '/users/:id'
  return ['/health', '/reports'].includes(path) ? path : undefined
}

const server = createServer(
  withSluice(
    http,
    (req, res) => {
      res.setHeader('Content-Type', 'application/json')
      res.end(JSON.stringify({ route: route(req.url) ?? 'not found' }))
    },
    { route: (req) => route(req.url) },
  ),
)
server.listen(port, '127.0.0.1', () => {
  const address = server.address()
  console.log(`listening on http://127.0.0.1:${typeof address === 'object' && address ? address.port : port}`)
})
