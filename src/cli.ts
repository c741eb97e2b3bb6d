#!/usr/bin/env node
// The `sluice` command. `sluice serve` runs the decision service (in-memory store by default).
import { createServer } from 'node:http'
import { parseArgs } from 'node:util'

const HELP = `Usage: sluice <command> [options]

Commands:
  serve    Run the decision service
    --port N     Port to listen on (default 8080, or SLUICE_PORT)
    --host H     Address to bind (default 127.0.0.1, or SLUICE_HOST)

  sluice --help    This text
`

function serve(argv: string[]): void {
  const { values } = parseArgs({
    args: argv,
    options: { port: { type: 'string' }, host: { type: 'string' }, help: { type: 'boolean' } },
    strict: true,
  })
  if (values.help) {
    process.stdout.write(HELP)
    return
  }
  const port = Number(values.port ?? process.env.SLUICE_PORT ?? 8080)
  const host = values.host ?? process.env.SLUICE_HOST ?? '127.0.0.1'
  const server = createServer((req, res) => {
    if (req.method === 'GET' && req.url === '/healthz') {
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"status":"ok"}')
      return
    }
    res
      .writeHead(404, { 'content-type': 'application/json' })
      .end('{"error":"not_found","message":"no such route"}')
  })
  server.listen(port, host, () => {
    const address = server.address()
    const actual = typeof address === 'object' && address !== null ? address.port : port
    process.stdout.write(
      `sluice serving on http://${host}:${actual} (store: memory)\n  GET http://${host}:${actual}/healthz\n`,
    )
  })
  const stop = () => server.close(() => process.exit(0))
  process.once('SIGTERM', stop)
  process.once('SIGINT', stop)
}

const [command, ...rest] = process.argv.slice(2)
if (command === 'serve') serve(rest)
else if (command === undefined || command === '--help' || command === '-h' || command === 'help')
  process.stdout.write(HELP)
else {
  process.stderr.write(`sluice: unknown command ${JSON.stringify(command)}\n\n${HELP}`)
  process.exitCode = 2
}
