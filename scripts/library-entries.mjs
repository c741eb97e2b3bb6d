// The library's public entries (packages/sluice/entries.json) as the specifiers an importer writes
// (`sluice`, `sluice/redis`, ...) mapped to their source files: how the repository's own tools (the
// type checker's paths, vitest, `npm start`) read the library from source instead of its build.
import { readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const library = join(dirname(fileURLToPath(import.meta.url)), '..', 'packages', 'sluice')

/** `{ 'sluice': '<repo>/packages/sluice/src/index.ts', 'sluice/redis': '...', ... }` */
export function librarySources() {
  const entries = JSON.parse(readFileSync(join(library, 'entries.json'), 'utf8'))
  return Object.fromEntries(
    Object.entries(entries).map(([name, file]) => [
      name === 'index' ? 'sluice' : `sluice/${name}`,
      join(library, file),
    ]),
  )
}
