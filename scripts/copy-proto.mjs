// After tsup: put src/envoy/rls.proto beside the built chunks (src/envoy/grpc.ts loads it from
// the folder of its own module, which is dist/ once built).
import { copyFileSync } from 'node:fs'

copyFileSync('src/envoy/rls.proto', 'dist/rls.proto')
