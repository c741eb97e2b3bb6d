// The code blocks of README.md and docs/*.md as docs.test.ts checks them: which fences count, the
// `<!-- check: ... -->` markers that may precede a fence, and how blocks become files to type-check
// and run (with every compiler message mapped back to the markdown line it came from).

/** Fence languages that are checked; every other fence (json, sh, yaml, text, none) is prose. */
export const CHECKED_LANGS: Readonly<Record<string, 'ts' | 'js'>> = {
  ts: 'ts',
  typescript: 'ts',
  js: 'js',
  javascript: 'js',
  mjs: 'js',
}

/**
 * What a marker may say, as words after `check:` (several: `<!-- check: continues run -->`).
 * - `continues`: the block is appended to the previous checked block of the same file (one program).
 * - `run`: the program the block belongs to is also executed with tsx and must exit 0.
 */
const MARKER_WORDS = new Set(['continues', 'run'])

export interface Block {
  file: string
  /** 1-based line of the opening fence. */
  line: number
  lang: 'ts' | 'js'
  code: string
  continues: boolean
  run: boolean
}

/** Thrown for a marker the checker does not know, or one that precedes no checked fence. */
export class MarkerError extends Error {}

const FENCE = /^(\s*)(`{3,}|~{3,})\s*([\w-]*)[^`]*$/
const MARKER = /^\s*<!--\s*check:\s*(.*?)\s*-->\s*$/

/** Every checked block of one markdown file, in order. */
export function extractBlocks(file: string, markdown: string): Block[] {
  const lines = markdown.split('\n')
  const blocks: Block[] = []
  let marker: { words: Set<string>; line: number } | undefined
  for (let i = 0; i < lines.length; i++) {
    const text = lines[i] as string
    const m = MARKER.exec(text)
    if (m !== null) {
      if (marker !== undefined) throw new MarkerError(`${file}:${marker.line}: marker precedes no code block`)
      const words = new Set((m[1] as string).split(/[\s,]+/).filter((w) => w !== ''))
      if (words.size === 0) throw new MarkerError(`${file}:${i + 1}: check marker without a word`)
      for (const w of words)
        if (!MARKER_WORDS.has(w))
          throw new MarkerError(
            `${file}:${i + 1}: unknown check marker word ${JSON.stringify(w)} (known: ${[...MARKER_WORDS].join(', ')})`,
          )
      marker = { words, line: i + 1 }
      continue
    }
    const fence = FENCE.exec(text)
    if (fence === null) {
      if (marker !== undefined && text.trim() !== '')
        throw new MarkerError(`${file}:${marker.line}: marker precedes no code block`)
      continue
    }
    const indent = (fence[1] as string).length
    const ticks = fence[2] as string
    const lang = CHECKED_LANGS[(fence[3] as string).toLowerCase()]
    const close = new RegExp(`^\\s*${ticks[0] === '~' ? '~' : '`'}{${ticks.length},}\\s*$`)
    const body: string[] = []
    let j = i + 1
    for (; j < lines.length; j++) {
      const inner = lines[j] as string
      if (close.test(inner)) break
      // A fence inside a list item is indented: its lines lose that indent.
      body.push(inner.slice(Math.min(indent, inner.length - inner.trimStart().length)))
    }
    if (j === lines.length) throw new MarkerError(`${file}:${i + 1}: code fence is never closed`)
    if (lang === undefined) {
      if (marker !== undefined)
        throw new MarkerError(`${file}:${marker.line}: marker precedes a fence that is not checked`)
    } else {
      const continues = marker?.words.has('continues') ?? false
      if (continues && blocks.length === 0)
        throw new MarkerError(`${file}:${i + 1}: "continues" on the first code block of the file`)
      blocks.push({
        file,
        line: i + 1,
        lang,
        code: body.join('\n'),
        continues,
        run: marker?.words.has('run') ?? false,
      })
    }
    marker = undefined
    i = j
  }
  if (marker !== undefined) throw new MarkerError(`${file}:${marker.line}: marker precedes no code block`)
  return blocks
}

/** One program: a block and the blocks that continue it, written as one module. */
export interface Program {
  /** File name in the checking project: `README-1.ts`, `docs-http-2.ts` (the program's number in its file). */
  name: string
  source: string
  run: boolean
  /** Markdown `file:line` of each line of `source` (past the blocks: the program's first line). */
  origin: string[]
}

/** Joins blocks into programs (`continues` appends to the previous program of the same file). */
export function toPrograms(blocks: readonly Block[]): Program[] {
  const programs: Program[] = []
  const counts = new Map<string, number>()
  let last: { file: string; program: Program } | undefined
  for (const block of blocks) {
    const lines = block.code.split('\n')
    const origin = lines.map((_, k) => `${block.file}:${block.line + 1 + k}`)
    if (block.continues && last !== undefined && last.file === block.file) {
      last.program.source += `\n${block.code}`
      last.program.origin.push(...origin)
      last.program.run ||= block.run
      continue
    }
    const n = (counts.get(block.file) ?? 0) + 1
    counts.set(block.file, n)
    const ext = block.lang === 'ts' ? 'ts' : 'js'
    const program: Program = {
      name: `${block.file.replace(/\.md$/, '').replaceAll('/', '-')}-${n}.${ext}`,
      source: block.code,
      run: block.run,
      origin,
    }
    programs.push(program)
    last = { file: block.file, program }
  }
  // Every program is a module of its own (top-level await, no names shared between programs).
  for (const p of programs) p.source += '\nexport {}\n'
  return programs
}

/**
 * Maps tsc `--pretty false` output for files named after `programs` back to markdown lines:
 * `blocks/README.md-1.ts(3,5): error TS2304: ...` becomes `README.md:42:5: error TS2304: ...`.
 * Lines about other files are kept as they are.
 */
export function mapDiagnostics(output: string, programs: readonly Program[], folder: string): string[] {
  const byName = new Map(programs.map((p) => [`${folder}/${p.name}`, p]))
  const out: string[] = []
  for (const line of output.split('\n')) {
    if (line.trim() === '') continue
    const m = /^(.*?)\((\d+),(\d+)\): (.*)$/.exec(line)
    const program = m === null ? undefined : byName.get((m[1] as string).replaceAll('\\', '/'))
    if (m === null || program === undefined) {
      out.push(line)
      continue
    }
    const where = program.origin[Number(m[2]) - 1] ?? program.origin[0]
    out.push(`${where}:${m[3]}: ${m[4]}`)
  }
  return out
}
