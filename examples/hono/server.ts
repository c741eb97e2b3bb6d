// Hono (on @hono/node-server) with layered limits and tiers: node --import tsx examples/hono/server.ts
// Try: curl -i -X POST -H 'Authorization: Bearer carol' http://127.0.0.1:3000/reports
import { serve } from '@hono/node-server'
import { Hono } from 'hono'
import { createHttpLimiter } from 'sluice'
import { sluice } from 'sluice/hono'
import { options, port } from '../shared.js'

// The per-route cost goes in the core's `routes` table, so one global middleware serves every route.
const http = createHttpLimiter({ ...options, routes: { 'POST /reports': { cost: 5 } } })
const app = new Hono()
app.use('*', sluice(http))

app.get('/health', (c) => c.text('ok'))
app.get('/users/:id', (c) => c.json({ id: c.req.param('id') }))
app.post('/reports', (c) => c.json({ queued: true }, 202))

serve({ fetch: app.fetch, port, hostname: '127.0.0.1' }, (info) => {
  console.log(`listening on http://127.0.0.1:${info.port}`)
})
