// Express with layered limits and tiers: node --import tsx examples/express/server.ts
// Try: curl -i -H 'Authorization: Bearer alice' http://127.0.0.1:3000/users/1
import express from 'express'
import { createHttpLimiter } from 'sluice'
import { sluice } from 'sluice/express'
import { options, port } from '../shared.js'

const limit = sluice(createHttpLimiter(options))
const app = express()

app.get('/health', (_req, res) => {
  res.send('ok')
})
// Mounted per route, so the limiter sees the route pattern ('/users/:id', not '/users/1').
app.get('/users/:id', limit, (req, res) => {
  res.json({ id: req.params.id })
})
// Reports cost 5 units of every layer without a fixed cost, and hit the tight `reports` layer too.
app.post('/reports', limit.route({ cost: 5 }), (_req, res) => {
  res.status(202).json({ queued: true })
})

const server = app.listen(port, '127.0.0.1', () => {
  const address = server.address()
  console.log(`listening on http://127.0.0.1:${typeof address === 'object' && address ? address.port : port}`)
})
