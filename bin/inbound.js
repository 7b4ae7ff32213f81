#!/usr/bin/env node
// The `inbound` operator CLI (src/cli/inbound.ts). It runs the compiled code in dist/ (built by `npm run build`
// and by `npm start`), so nothing compiles TypeScript at run time. In a source checkout where dist/ is missing or
// older than src/ (someone is editing the code) and tsx is installed, it runs the source instead of stale code.
import { existsSync, readdirSync, statSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const built = join(root, 'dist', 'cli', 'inbound.js')
const buildInfo = join(root, 'dist', '.tsbuildinfo')
const src = join(root, 'src')

function newestSource() {
  let newest = 0
  for (const e of readdirSync(src, { withFileTypes: true, recursive: true })) {
    if (e.isFile() && e.name.endsWith('.ts')) newest = Math.max(newest, statSync(join(e.parentPath, e.name)).mtimeMs)
  }
  return newest
}

const fresh = existsSync(built) && existsSync(buildInfo) && (!existsSync(src) || statSync(buildInfo).mtimeMs >= newestSource())
let tsx
if (!fresh) {
  try {
    tsx = await import('tsx/esm/api')
  } catch {}
}
if (tsx) {
  tsx.register()
  await import(pathToFileURL(join(src, 'cli', 'inbound.ts')).href)
} else if (existsSync(built)) {
  await import(pathToFileURL(built).href)
} else {
  process.stderr.write('inbound: not built yet; run `npm run build` (npm start builds it too)\n')
  process.exit(2)
}
