// A bench module run again as a script, in a Node.js process of its own (the same Node.js flags,
// e.g. tsx's), so what it measures does not share a heap or V8's type feedback with anything run
// before it. The script gets `args` and then a file path, and writes its answer there as JSON.
import { spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

/** Run `script` with `args` and an answer file in a child process (with `nodeFlags`); its answer, parsed. */
export async function inChild<T>(
  script: string,
  args: readonly string[],
  what: string,
  /** Node.js flags for the child beyond this process's own (e.g. V8's heap sizes). */
  nodeFlags: readonly string[] = [],
): Promise<T> {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-bench-'))
  const out = join(dir, 'answer.json')
  try {
    const code = await new Promise<number | null>((done, fail) => {
      const child = spawn(process.execPath, [...process.execArgv, ...nodeFlags, script, ...args, out], {
        stdio: ['ignore', 'inherit', 'inherit'],
      })
      child.on('error', fail)
      child.on('exit', done)
    })
    if (code !== 0) throw new Error(`${what}: exited with code ${code}`)
    return JSON.parse(readFileSync(out, 'utf8')) as T
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}
