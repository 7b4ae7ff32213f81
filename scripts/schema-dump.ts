/**
 * Writes src/store/schema.sql: the schema of a fresh embedded database after every migration and definition file
 * (`npm run schema:dump`). Run it after changing a migration or a definition file, and commit the diff with the change;
 * test/store/schema.test.ts fails until the two agree. The dump is the same on PostgreSQL (the test checks both).
 */
import { writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { migrate } from '../src/store/migrate.ts'
import { openPglite } from '../src/store/pglite.ts'
import { dumpSchema } from '../src/store/schema-dump.ts'

const target = join(dirname(fileURLToPath(import.meta.url)), '..', 'src', 'store', 'schema.sql')
const store = await openPglite()
try {
  await migrate(store)
  writeFileSync(target, await dumpSchema(store))
  console.log(`wrote ${target}`)
} finally {
  await store.close()
}
