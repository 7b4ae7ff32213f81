import { lockDataDir } from '../../src/store/data-dir-lock.ts'

/**
 * A contender for a data directory's lock (data-dir-lock.test.ts): prints "ready", waits for "go" on stdin,
 * tries the lock, prints "won" or "lost <reason>", and holds what it won until stdin closes.
 */
const dir = process.argv[2] as string
process.stdin.setEncoding('utf8')
let input = ''
const go = new Promise<void>((resolve) => {
  process.stdin.on('data', (d) => {
    input += d
    if (input.includes('go')) resolve()
  })
})
const closed = new Promise<void>((resolve) => process.stdin.on('end', () => resolve()))
process.stdout.write('ready\n')
await go
try {
  const lock = await lockDataDir(dir)
  process.stdout.write('won\n')
  await closed
  lock.release()
} catch (err) {
  process.stdout.write(`lost ${(err as Error).message}\n`)
}
