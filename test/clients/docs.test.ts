// docs/clients.md's code: the Go block is built against examples/go's package, the Python block is
// imported beside examples/fastapi's module (which builds its SluiceLimit and FastAPI app).
import { spawnSync } from 'node:child_process'
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, describe, expect, it } from 'vitest'
import { EXAMPLES, goEnv, python } from './helpers.js'

const PAGE = readFileSync(fileURLToPath(new URL('../../docs/clients.md', import.meta.url)), 'utf8')

function blocks(language: string): string[] {
  return [...PAGE.matchAll(new RegExp(`^\`\`\`${language}\\n([\\s\\S]*?)^\`\`\`$`, 'gm'))].map((m) => m[1]!)
}

describe('docs/clients.md', () => {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-clients-docs-'))
  afterAll(() => rmSync(dir, { recursive: true, force: true }))

  it('has a Go block that builds against examples/go', () => {
    const [code, ...more] = blocks('go')
    expect(code).toBeDefined()
    expect(more).toHaveLength(0)
    const module = join(dir, 'go')
    cpSync(join(EXAMPLES, 'go'), module, { recursive: true })
    mkdirSync(join(module, 'cmd', 'docs'), { recursive: true })
    writeFileSync(join(module, 'cmd', 'docs', 'main.go'), code!)
    const built = spawnSync('go', ['build', '-o', join(dir, 'docs-example'), './cmd/docs'], {
      cwd: module,
      env: { ...process.env, ...goEnv(dir) },
      encoding: 'utf8',
      timeout: 120_000,
    })
    expect(built.stderr).toBe('')
    expect(built.status).toBe(0)
  })

  it('has a Python block that imports beside examples/fastapi and builds its app', () => {
    const [code, ...more] = blocks('python')
    expect(code).toBeDefined()
    expect(more).toHaveLength(0)
    const folder = join(dir, 'py')
    mkdirSync(folder)
    cpSync(join(EXAMPLES, 'fastapi', 'sluice_limit.py'), join(folder, 'sluice_limit.py'))
    writeFileSync(join(folder, 'docs_example.py'), code!)
    const run = spawnSync(
      python(),
      [
        '-c',
        'import docs_example as d; print(type(d.app).__name__, d.limit.fail_mode, [r.path for r in d.app.routes][-1])',
      ],
      {
        cwd: folder,
        env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1' },
        encoding: 'utf8',
        timeout: 60_000,
      },
    )
    expect(run.stderr).toBe('')
    expect(run.stdout.trim()).toBe('FastAPI closed /hello')
  })
})
