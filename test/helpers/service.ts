// Shared pieces of the service tests: free ports, an in-process service, JSON requests.
import { pino } from 'pino'
import { afterEach } from 'vitest'
import { parseConfig } from '../../packages/sluice-server/src/server/config.js'
import type { Service, ServiceOptions } from '../../packages/sluice-server/src/server/service.js'
import { createService } from '../../packages/sluice-server/src/server/service.js'

export const quietLogger = pino({ level: 'silent' })

export { freePort } from './ports.js'

export interface Running {
  service: Service
  url: string
}

/** Start a service from YAML text on 127.0.0.1, port 0. */
export async function startService(
  yaml: string,
  extra: Omit<ServiceOptions, 'config'> = {},
): Promise<Running> {
  const service = createService({ config: parseConfig(yaml, 'test.yaml'), logger: quietLogger, ...extra })
  const { url } = await service.listen(0)
  return { service, url }
}

/**
 * `startService` for a test file whose tests start services of their own: each one is closed after
 * its test (grace 500 ms). Call it at the top level of the file.
 */
export function servicesClosedAfterEach(): typeof startService {
  const started: Running[] = []
  afterEach(async () => {
    for (const r of started.splice(0)) await r.service.close(500)
  })
  return async (yaml, extra = {}) => {
    const r = await startService(yaml, extra)
    started.push(r)
    return r
  }
}

export interface JsonResponse {
  status: number
  headers: Headers
  body: Record<string, unknown>
}

/** POST a body (an object is JSON-encoded, a string is sent as is) and parse the JSON answer. */
export async function post(
  url: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<JsonResponse> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  })
  return { status: res.status, headers: res.headers, body: (await res.json()) as Record<string, unknown> }
}

export async function get(url: string, headers: Record<string, string> = {}): Promise<JsonResponse> {
  const res = await fetch(url, { headers })
  const text = await res.text()
  let body: Record<string, unknown> = {}
  try {
    body = JSON.parse(text) as Record<string, unknown>
  } catch {
    body = { text }
  }
  return { status: res.status, headers: res.headers, body }
}
