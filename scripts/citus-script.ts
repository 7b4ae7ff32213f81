/**
 * Writes scripts/citus-distribute.sql: the Citus layout of a freshly migrated database (src/store/citus.ts,
 * docs/scaling.md). Run it after a migration adds or drops a table (`npm run citus:script`) and commit the diff;
 * test/store/citus-script.test.ts fails until the two agree.
 */
import { writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { citusScript } from '../src/store/citus.ts'
import { migrate } from '../src/store/migrate.ts'
import { openPglite } from '../src/store/pglite.ts'

const target = join(dirname(fileURLToPath(import.meta.url)), 'citus-distribute.sql')
const store = await openPglite()
try {
  await migrate(store)
  writeFileSync(target, await citusScript(store))
  console.log(`wrote ${target}`)
} finally {
  await store.close()
}
