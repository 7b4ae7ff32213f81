/**
 * The statement audit over what a test run recorded (docs/scaling.md, "The statement audit"): run the suite (or
 * some files) with STATEMENT_AUDIT_FILE=<file>, then `tsx scripts/statement-audit.ts <file>`. Every distinct
 * statement the service sent is judged on a fresh database of the partitioned layout (DATABASE_URL when set,
 * else the embedded store); prints the counts and each not-routed statement, and exits 1 when one of them is not
 * a named exception (test/store/statement-audit-exceptions.ts). `--all` lists the named ones too.
 */
import { readFileSync } from 'node:fs'
import { describe, judgeStatements, parseAuditFile, summarize } from '../test/helpers/statement-audit.ts'
import { createTestDatabase } from '../test/helpers/store.ts'
import { EXCEPTIONS } from '../test/store/statement-audit-exceptions.ts'

const [file, flag] = process.argv.slice(2)
if (!file) {
  console.error('usage: tsx scripts/statement-audit.ts <recorded statements file> [--all]')
  process.exit(2)
}
const statements = parseAuditFile(readFileSync(file, 'utf8'))
const db = await createTestDatabase({ layout: 'partitioned' })
try {
  const judged = await judgeStatements(db.store, statements)
  const s = summarize(judged, EXCEPTIONS)
  console.log(
    `${s.distinct} distinct statements: ${s.routed} routed, ${s.notRouted} not routed (${s.named} named exceptions), ` +
      `${s.noClientTable} on no client-keyed table, ${s.notJudged} not judged`,
  )
  const shown = flag === '--all' ? judged.filter((j) => j.verdict === 'not routed') : s.unnamed
  for (const j of shown) console.log(`- ${describe(j)}`)
  if (flag === '--all') for (const j of judged.filter((x) => x.verdict === 'not judged')) console.log(`? ${j.source}: ${j.note}`)
  process.exitCode = s.unnamed.length > 0 ? 1 : 0
} finally {
  await db.drop()
}
