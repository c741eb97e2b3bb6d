// Fastify with layered limits and tiers: node --import tsx examples/fastify/server.ts
// Try: curl -i -H 'Authorization: Bearer bob' http://127.0.0.1:3000/users/1
import Fastify from 'fastify'
import { sluice } from 'sluice/fastify'
import { options, port } from '../shared.js'

const app = Fastify()
await app.register(sluice, options)

app.get('/health', async () => 'ok')
app.get<{ Params: { id: string } }>('/users/:id', async (request) => ({ id: request.params.id }))
// Per-route options live in the route config.
app.post('/reports', { config: { sluice: { cost: 5 } } }, async (_request, reply) => {
  reply.code(202)
  return { queued: true }
})

const address = await app.listen({ port, host: '127.0.0.1' })
console.log(`listening on ${address}`)
