import { memoryStore } from '../../src/stores/memory.js'
import { runConformance } from './suite.js'

runConformance('memory', (now) => memoryStore({ now }))
