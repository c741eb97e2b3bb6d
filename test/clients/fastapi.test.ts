// examples/fastapi: the FastAPI dependency (httpx), served by uvicorn with Debian's Python packages,
// in front of a real `sluice serve` (the shared suite in ./helpers.ts).
import { join } from 'node:path'
import { clientSuite, EXAMPLES, python, startProcess } from './helpers.js'

clientSuite(
  'fastapi',
  () =>
    ({ sluiceUrl, failMode, policy }) =>
      startProcess(
        python(),
        ['app.py'],
        {
          PORT: '0',
          SLUICE_URL: sluiceUrl,
          SLUICE_FAIL_MODE: failMode,
          SLUICE_POLICY: policy,
          PYTHONDONTWRITEBYTECODE: '1',
        },
        join(EXAMPLES, 'fastapi'),
      ),
)
