#!/usr/bin/env node
// Runs Biome from its platform package. The @biomejs/biome wrapper lists a package for every platform,
// and this workplace's registry serves only linux-x64, so `npm ci` could not validate a lockfile holding
// the wrapper (docs/decisions.md). The linux-x64 binary is an optional dependency instead.
import { spawnSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'

const require = createRequire(import.meta.url)
let binary
try {
  binary = join(dirname(require.resolve('@biomejs/cli-linux-x64/package.json')), 'biome')
} catch {}
if (!binary || !existsSync(binary)) {
  process.stderr.write('biome: no binary for this platform (only linux-x64 is installed); skipping\n')
  process.exit(process.env.CI ? 1 : 0)
}
const result = spawnSync(binary, process.argv.slice(2), { stdio: 'inherit' })
process.exit(result.status ?? 1)
