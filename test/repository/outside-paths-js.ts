// The JavaScript and TypeScript half of outside-paths.ts: evaluates, without running the code, the
// path expressions it can (import.meta.url and dirname, __dirname, new URL, node:path and node:url
// functions, os.tmpdir, process.cwd, consts in scope, literals, templates, import specifiers).
import { posix } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import ts from 'typescript'

/** Where a path expression points, when it can be told without running the code. */
type Value = { kind: 'path'; path: string } | { kind: 'url'; url: URL } | { kind: 'text'; text: string }

/** Stands for os.tmpdir(): a root of its own, so a clone that sits in /tmp is no excuse. */
export const TMPDIR = '/<os.tmpdir()>'
/** Stands for os.homedir(): nothing there is the repository's. */
const HOMEDIR = '/<os.homedir()>'
/** Stands for a value the scan cannot know, inside a path (a file name from a variable). */
const SOME_NAME = '<name>'

/** What the scan reports to. */
export interface PathSink {
  readonly root: string
  /** A path computed at `file:line`. */
  check(file: string, line: number, written: string, path: string): void
  /** A string no expression turned into a path: its path-like words. */
  words(file: string, line: number, text: string, inCode: boolean): void
}

/** The declaration `name` refers to at `from`: the nearest scope that declares it. */
function declarationOf(name: string, from: ts.Node): ts.Node | undefined {
  const bindsName = (binding: ts.BindingName): boolean =>
    ts.isIdentifier(binding)
      ? binding.text === name
      : binding.elements.some((e) => !ts.isOmittedExpression(e) && bindsName(e.name))
  for (let scope: ts.Node | undefined = from.parent; scope !== undefined; scope = scope.parent) {
    if (ts.isFunctionLike(scope)) {
      for (const p of scope.parameters) if (bindsName(p.name)) return p
    }
    if (ts.isCatchClause(scope) && scope.variableDeclaration && bindsName(scope.variableDeclaration.name))
      return scope.variableDeclaration
    if (
      (ts.isForStatement(scope) || ts.isForOfStatement(scope) || ts.isForInStatement(scope)) &&
      scope.initializer !== undefined &&
      ts.isVariableDeclarationList(scope.initializer)
    ) {
      for (const d of scope.initializer.declarations) if (bindsName(d.name)) return d
    }
    const statements =
      ts.isSourceFile(scope) || ts.isBlock(scope) || ts.isModuleBlock(scope) ? scope.statements : []
    for (const statement of statements) {
      if (ts.isVariableStatement(statement)) {
        for (const d of statement.declarationList.declarations) if (bindsName(d.name)) return d
      } else if (
        (ts.isFunctionDeclaration(statement) || ts.isClassDeclaration(statement)) &&
        statement.name?.text === name
      )
        return statement
      else if (ts.isImportDeclaration(statement)) {
        const clause = statement.importClause
        if (clause?.name?.text === name) return clause
        const bindings = clause?.namedBindings
        if (bindings !== undefined && ts.isNamespaceImport(bindings) && bindings.name.text === name)
          return bindings
        if (bindings !== undefined && ts.isNamedImports(bindings))
          for (const e of bindings.elements) if (e.name.text === name) return e
      }
    }
  }
  return undefined
}

const MODULES: Record<string, string> = {
  path: 'path',
  'node:path': 'path',
  'path/posix': 'path',
  'node:path/posix': 'path',
  url: 'url',
  'node:url': 'url',
  os: 'os',
  'node:os': 'os',
}

function moduleOf(node: ts.Node): string | undefined {
  let n: ts.Node | undefined = node
  while (n !== undefined && !ts.isImportDeclaration(n)) n = n.parent
  return n !== undefined && ts.isStringLiteral(n.moduleSpecifier)
    ? MODULES[n.moduleSpecifier.text]
    : undefined
}

/** The module of `const x = require('node:path')` or `const { join } = require('node:path')`. */
function requiredModule(declared: ts.Node): string | undefined {
  if (!ts.isVariableDeclaration(declared) || declared.initializer === undefined) return undefined
  const init = declared.initializer
  if (!ts.isCallExpression(init) || !ts.isIdentifier(init.expression) || init.expression.text !== 'require')
    return undefined
  const [arg] = init.arguments
  return arg !== undefined && ts.isStringLiteral(arg) ? MODULES[arg.text] : undefined
}

/** `path.join` for `join` imported from node:path, for `path.join`, `os.tmpdir`, `process.cwd`. */
function functionOf(callee: ts.Expression): string | undefined {
  if (ts.isIdentifier(callee)) {
    const declared = declarationOf(callee.text, callee)
    if (declared === undefined) return undefined
    if (ts.isImportSpecifier(declared)) {
      const module = moduleOf(declared)
      return module === undefined ? undefined : `${module}.${(declared.propertyName ?? declared.name).text}`
    }
    const module = requiredModule(declared)
    if (
      module === undefined ||
      !ts.isVariableDeclaration(declared) ||
      !ts.isObjectBindingPattern(declared.name)
    )
      return undefined
    const element = declared.name.elements.find((e) => ts.isIdentifier(e.name) && e.name.text === callee.text)
    const imported = element?.propertyName ?? element?.name
    return imported !== undefined && ts.isIdentifier(imported) ? `${module}.${imported.text}` : undefined
  }
  if (ts.isPropertyAccessExpression(callee) && ts.isIdentifier(callee.expression)) {
    const object = callee.expression.text
    if (object === 'process') return `process.${callee.name.text}`
    const declared = declarationOf(object, callee)
    if (declared === undefined) return undefined
    const module =
      ts.isImportClause(declared) || ts.isNamespaceImport(declared)
        ? moduleOf(declared)
        : ts.isVariableDeclaration(declared) && ts.isIdentifier(declared.name)
          ? requiredModule(declared)
          : undefined
    return module === undefined ? undefined : `${module}.${callee.name.text}`
  }
  return undefined
}

const PATH_FUNCTIONS = new Set([
  'path.join',
  'path.resolve',
  'path.dirname',
  'path.normalize',
  'url.fileURLToPath',
  'url.pathToFileURL',
])

function isLiteral(node: ts.Node): boolean {
  return ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node) || ts.isTemplateExpression(node)
}

class JsFile {
  private readonly evaluating = new Set<ts.Node>()
  constructor(
    private readonly scanner: PathSink,
    private readonly file: string,
    private readonly source: ts.SourceFile,
  ) {}

  private get dir() {
    return posix.dirname(this.file)
  }

  line(node: ts.Node): number {
    return this.source.getLineAndCharacterOfPosition(node.getStart(this.source)).line + 1
  }

  run(): void {
    this.visit(this.source)
  }

  /** Text a string-valued expression stands for; SOME_NAME for unknown parts after a known start. */
  private text(node: ts.Node): string | undefined {
    const value = this.evaluate(node)
    if (value === undefined) return undefined
    if (value.kind === 'text') return value.text
    if (value.kind === 'path') return value.path
    return value.url.href
  }

  private concat(parts: (string | undefined)[]): Value | undefined {
    if (parts[0] === undefined) return undefined
    return { kind: 'text', text: parts.map((p) => p ?? SOME_NAME).join('') }
  }

  /** An absolute path from a string-valued result: relative ones are from the working directory. */
  private asPath(value: Value | undefined): string | undefined {
    if (value === undefined) return undefined
    if (value.kind === 'path') return value.path
    if (value.kind === 'url') return value.url.protocol === 'file:' ? fileURLToPath(value.url) : undefined
    return value.text.startsWith('file:') ? undefined : posix.resolve(this.scanner.root, value.text)
  }

  private asUrl(value: Value | undefined): URL | undefined {
    if (value === undefined) return undefined
    if (value.kind === 'url') return value.url
    if (value.kind === 'text') {
      try {
        return new URL(value.text)
      } catch {
        return undefined
      }
    }
    return undefined
  }

  evaluate(node: ts.Node): Value | undefined {
    if (this.evaluating.has(node)) return undefined
    this.evaluating.add(node)
    try {
      return this.evaluateOnce(node)
    } finally {
      this.evaluating.delete(node)
    }
  }

  private evaluateOnce(node: ts.Node): Value | undefined {
    if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node))
      return { kind: 'text', text: node.text }
    if (ts.isTemplateExpression(node)) {
      const parts: (string | undefined)[] = node.head.text === '' ? [] : [node.head.text]
      for (const span of node.templateSpans) parts.push(this.text(span.expression), span.literal.text)
      return this.concat(parts)
    }
    if (ts.isBinaryExpression(node) && node.operatorToken.kind === ts.SyntaxKind.PlusToken)
      return this.concat([this.text(node.left), this.text(node.right)])
    if (
      ts.isParenthesizedExpression(node) ||
      ts.isAsExpression(node) ||
      ts.isNonNullExpression(node) ||
      ts.isSatisfiesExpression(node)
    )
      return this.evaluate(node.expression)
    if (ts.isIdentifier(node)) {
      if (node.text === '__dirname' || node.text === '__filename') {
        if (declarationOf(node.text, node) !== undefined) return undefined
        return { kind: 'path', path: node.text === '__dirname' ? this.dir : this.file }
      }
      const declared = declarationOf(node.text, node)
      if (
        declared !== undefined &&
        ts.isVariableDeclaration(declared) &&
        ts.isIdentifier(declared.name) &&
        declared.initializer !== undefined &&
        ts.isVariableDeclarationList(declared.parent) &&
        (declared.parent.flags & ts.NodeFlags.Const) !== 0
      )
        return this.evaluate(declared.initializer)
      return undefined
    }
    if (ts.isPropertyAccessExpression(node)) {
      const name = node.name.text
      if (ts.isMetaProperty(node.expression)) {
        if (name === 'dirname') return { kind: 'path', path: this.dir }
        if (name === 'filename') return { kind: 'path', path: this.file }
        if (name === 'url') return { kind: 'url', url: pathToFileURL(this.file) }
        return undefined
      }
      if (name === 'pathname' || name === 'href') {
        const url = this.asUrl(this.evaluate(node.expression))
        if (url === undefined) return undefined
        return name === 'href'
          ? { kind: 'url', url }
          : url.protocol === 'file:'
            ? { kind: 'path', path: fileURLToPath(url) }
            : { kind: 'text', text: url.pathname }
      }
      return undefined
    }
    if (ts.isNewExpression(node) && ts.isIdentifier(node.expression) && node.expression.text === 'URL') {
      const [input, base] = node.arguments ?? []
      if (input === undefined) return undefined
      const text = this.text(input)
      if (text === undefined) return undefined
      try {
        if (base === undefined) return { kind: 'url', url: new URL(text) }
        const baseUrl = this.asUrl(this.evaluate(base))
        return baseUrl === undefined ? undefined : { kind: 'url', url: new URL(text, baseUrl) }
      } catch {
        return undefined
      }
    }
    if (ts.isCallExpression(node)) return this.call(node)
    return undefined
  }

  private call(node: ts.CallExpression): Value | undefined {
    const fn = functionOf(node.expression)
    if (fn === 'os.tmpdir') return { kind: 'path', path: TMPDIR }
    if (fn === 'os.homedir') return { kind: 'path', path: HOMEDIR }
    if (fn === 'process.cwd') return { kind: 'path', path: this.scanner.root }
    if (fn === undefined || !PATH_FUNCTIONS.has(fn)) return undefined
    const args = node.arguments.map((a) => this.evaluate(a))
    if (fn === 'url.fileURLToPath') {
      const url = this.asUrl(args[0])
      return url?.protocol === 'file:' ? { kind: 'path', path: fileURLToPath(url) } : undefined
    }
    if (fn === 'url.pathToFileURL') {
      const path = this.asPath(args[0])
      return path === undefined ? undefined : { kind: 'url', url: pathToFileURL(path) }
    }
    if (args[0] === undefined) return undefined
    const texts = args.map((a) =>
      a === undefined ? SOME_NAME : a.kind === 'url' ? undefined : this.textOf(a),
    )
    if (texts.some((t) => t === undefined)) return undefined
    const parts = texts as string[]
    if (fn === 'path.dirname' || fn === 'path.normalize') {
      const path = this.asPath(args[0])
      if (path === undefined) return undefined
      return { kind: 'path', path: fn === 'path.dirname' ? posix.dirname(path) : posix.normalize(path) }
    }
    if (fn === 'path.join') {
      const joined = posix.join(...parts)
      return joined.startsWith('/') ? { kind: 'path', path: joined } : { kind: 'text', text: joined }
    }
    return { kind: 'path', path: posix.resolve(this.scanner.root, ...parts) }
  }

  private textOf(value: Value): string {
    return value.kind === 'path' ? value.path : value.kind === 'text' ? value.text : value.url.href
  }

  /** A module specifier: relative ones are from the file's folder. */
  private specifier(node: ts.Node): void {
    if (!ts.isStringLiteralLike(node)) return
    const text = node.text
    if (text.startsWith('.'))
      this.scanner.check(this.file, this.line(node), text, posix.resolve(this.dir, text))
    else if (text.startsWith('/') || text.startsWith('file:')) {
      const path = text.startsWith('file:') ? fileURLToPath(text) : text
      this.scanner.check(this.file, this.line(node), text, path)
    }
  }

  private visit = (node: ts.Node): void => {
    if (
      (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) &&
      node.moduleSpecifier !== undefined
    ) {
      this.specifier(node.moduleSpecifier)
      return
    }
    if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument)) {
      this.specifier(node.argument.literal)
      return
    }
    if (ts.isCallExpression(node) && node.arguments[0] !== undefined) {
      const callee = node.expression
      const importLike =
        callee.kind === ts.SyntaxKind.ImportKeyword ||
        (ts.isIdentifier(callee) && callee.text === 'require') ||
        (ts.isPropertyAccessExpression(callee) &&
          ts.isIdentifier(callee.expression) &&
          callee.expression.text === 'vi' &&
          ['mock', 'doMock', 'importActual', 'unmock'].includes(callee.name.text))
      if (importLike && isLiteral(node.arguments[0])) {
        this.specifier(node.arguments[0])
        for (const rest of node.arguments.slice(1)) this.visit(rest)
        return
      }
    }
    const value =
      ts.isCallExpression(node) ||
      ts.isNewExpression(node) ||
      ts.isPropertyAccessExpression(node) ||
      (ts.isIdentifier(node) && (node.text === '__dirname' || node.text === '__filename')) ||
      isLiteral(node) ||
      (ts.isBinaryExpression(node) && node.operatorToken.kind === ts.SyntaxKind.PlusToken)
        ? this.evaluate(node)
        : undefined
    const written = () => node.getText(this.source)
    if (value !== undefined && value.kind === 'text') {
      // A string nothing above turned into a path: a command line, a literal path, a relative one.
      this.scanner.words(this.file, this.line(node), value.text, true)
      return
    }
    if (value !== undefined) {
      const path = this.asPath(value)
      if (path !== undefined) this.scanner.check(this.file, this.line(node), written(), path)
      return
    }
    if (ts.isCallExpression(node) && PATH_FUNCTIONS.has(functionOf(node.expression) ?? '')) {
      // Unknown base (a parameter, an environment variable): its literal parts are relative to it.
      for (const arg of node.arguments) if (!isLiteral(arg)) this.visit(arg)
      return
    }
    ts.forEachChild(node, this.visit)
  }
}

/** Scan the JavaScript or TypeScript `text` of `file`. */
export function scanJs(sink: PathSink, file: string, text: string): void {
  const kind = file.endsWith('.tsx') ? ts.ScriptKind.TSX : ts.ScriptKind.TS
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, kind)
  new JsFile(sink, file, source).run()
}
