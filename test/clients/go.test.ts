// examples/go: the net/http middleware (standard library only), built with the machine's Go and run
// in front of a real `sluice serve` (the shared suite in ./helpers.ts).
import { spawnSync } from 'node:child_process'
import { join } from 'node:path'
import { clientSuite, EXAMPLES, goEnv, startProcess } from './helpers.js'

clientSuite('go', (dir) => {
  const binary = join(dir, 'demo')
  const env = { ...process.env, ...goEnv(dir) }
  const built = spawnSync('go', ['build', '-o', binary, './cmd/demo'], {
    cwd: join(EXAMPLES, 'go'),
    env,
    encoding: 'utf8',
    timeout: 120_000,
  })
  if (built.status !== 0)
    throw new Error(`go build failed (${built.error?.message ?? built.status}):\n${built.stderr}`)
  return ({ sluiceUrl, failMode, policy }) =>
    startProcess(binary, [], {
      PORT: '0',
      SLUICE_URL: sluiceUrl,
      SLUICE_FAIL_MODE: failMode,
      SLUICE_POLICY: policy,
    })
})
