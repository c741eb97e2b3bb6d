// The protection layer is transparent while the store answers: every conformance vector passes
// through protectStore exactly as it does on the bare store.

import { protectStore } from '../../packages/sluice/src/failover/index.js'
import { switchableStore } from '../helpers/switchable-store.js'
import { runConformance } from './suite.js'

runConformance('memory behind protectStore', (now) =>
  protectStore(switchableStore('answer', now), { onStoreError: 'closed', timeoutMs: 1000 }),
)
