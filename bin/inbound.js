#!/usr/bin/env node
// The `inbound` operator CLI: TypeScript source run through tsx (a runtime dependency, as for `npm start`).
import { register } from 'tsx/esm/api'

register()
await import('../src/cli/inbound.ts')
