import { memoryStore } from '../../packages/sluice/src/stores/memory.js'
import { runConformance } from './suite.js'

runConformance('memory', (now) => memoryStore({ now }))
