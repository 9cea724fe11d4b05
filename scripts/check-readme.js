#!/usr/bin/env node
// Checks every fenced code block of README.md and docs/*.md, so that none can drift from the
// code. .ci/run runs it after the build (and after .ci/node22-e2e.sh, which installs
// e2e/node22): node scripts/check-readme.js [file.md ...]
//
// THE CONVENTION (for whoever adds a block): the info string after ``` decides.
//   ```js  ```javascript  ```cjs  ```mjs
//       RUN with node, against this clone's build, each block alone in a new temp folder
//       (HOME and IDEMPOTENT_TOOLS_DB point there). A `js` block with an `import`/`export`
//       line runs as an ES module (top-level await allowed); otherwise it is CommonJS, where
//       top-level await is an error, as it would be for a user. It must work as pasted: its
//       own imports, no undefined names, exit 0 within 60 s. Stores read REDIS_URL and
//       DATABASE_URL (set here to the local Redis and Postgres when not set already).
//   ```ts  ```typescript
//       TYPE-CHECKED with tsc --strict as an ES module file (not run). Packages resolve from
//       this clone's node_modules, then e2e/node22/node_modules (Mastra, @openai/agents), then
//       e2e/engines/node_modules (the durable engines: npm run test:engines installs them).
//   ```sh  ```bash  ```shell  ```console  ```text  ```json  ```jsonc  ```yaml  ```toml
//   ```sql  ```diff  ```ini
//       SHOWN ONLY, never run: commands, output, configuration, error messages.
//   a block with no info string, or another one: an error (say what the block is).
//   `norun` after the language (```js norun) skips one js/ts block; the prose around it
//       must say why. Use it for nothing that a user would paste and run.
//   `example=PATH` after the language: the block is that file of the repository, byte for
//       byte (the README's framework sections are files under examples/ that CI runs too);
//       a file it imports from beside it (`./offline-model.mjs`, its fake model) runs with it.
//   `node22` after the language: the block runs under Node 22 (from .ci/nodes.sh), its
//       packages resolved from e2e/node22/node_modules first (Mastra 1.x, @openai/agents).
// README.md is at most 300 lines. And README.md's test command (the `npm test` line of its sh blocks) must be the command
// .ci/run runs, so that CI runs exactly what the README tells a contributor to run.
'use strict'

const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

const ROOT = path.join(__dirname, '..')
const RUN = new Set(['js', 'javascript', 'cjs', 'mjs'])
const TYPECHECK = new Set(['ts', 'typescript'])
const SHOWN = new Set(['sh', 'bash', 'shell', 'console', 'text', 'json', 'jsonc', 'yaml', 'toml', 'sql', 'diff', 'ini'])
const TIMEOUT_MS = 60_000
const E2E_MODULES = path.join(ROOT, 'e2e', 'node22', 'node_modules')
// The durable engines (Temporal, Inngest, Restate, DBOS, Vercel Workflow, Trigger.dev), which
// .ci/engines.sh installs (npm run test:engines, before this check in .ci/run).
const ENGINE_MODULES = path.join(ROOT, 'e2e', 'engines', 'node_modules')

/** Fenced blocks: { line (1-based, of the opening fence), lang, flags, code }. */
function blocks(markdown) {
  const found = []
  const lines = markdown.split('\n')
  for (let i = 0; i < lines.length; i++) {
    const open = /^ {0,3}(`{3,}|~{3,})\s*(.*)$/.exec(lines[i])
    if (!open) continue
    const [fence, info] = [open[1], open[2].trim()]
    const [lang = '', ...flags] = info.split(/\s+/).filter(Boolean)
    const body = []
    let j = i + 1
    while (j < lines.length && !new RegExp(`^ {0,3}${fence[0]}{${fence.length},}\\s*$`).test(lines[j])) body.push(lines[j++])
    found.push({ line: i + 1, lang: lang.toLowerCase(), flags, code: `${body.join('\n')}\n` })
    i = j
  }
  return found
}

/** node_modules for the blocks: this clone's packages, `idempotent-tools` itself, e2e extras. */
function linkModules(dir, e2eFirst = false) {
  const target = path.join(dir, 'node_modules')
  fs.mkdirSync(target)
  fs.symlinkSync(ROOT, path.join(target, 'idempotent-tools'), 'junction')
  const sources = [path.join(ROOT, 'node_modules'), E2E_MODULES, ENGINE_MODULES]
  for (const source of e2eFirst ? sources.reverse() : sources) {
    if (!fs.existsSync(source)) continue
    for (const entry of fs.readdirSync(source)) {
      if (entry.startsWith('.')) continue
      const scoped = entry.startsWith('@')
      const names = scoped ? fs.readdirSync(path.join(source, entry)).map((n) => `${entry}/${n}`) : [entry]
      for (const name of names) {
        const link = path.join(target, name)
        if (fs.existsSync(link)) continue
        fs.mkdirSync(path.dirname(link), { recursive: true })
        fs.symlinkSync(path.join(source, name), link, 'junction')
      }
    }
  }
}

function isModule(block) {
  return block.lang === 'mjs' || (block.lang !== 'cjs' && /^\s*(import|export)\s/m.test(block.code))
}

/** Node 22's binary, from .ci/nodes.sh (which installs it once). */
let node22
function node22Bin() {
  if (node22 === undefined) {
    const r = spawnSync('bash', [path.join(ROOT, '.ci', 'nodes.sh')], { encoding: 'utf8' })
    const m = /^NODE22_BIN=(.*)$/m.exec(r.stdout ?? '')
    node22 = m ? path.join(m[1], 'node') : null
  }
  return node22
}

function runJs(block, dir, nodeBin = process.execPath) {
  const file = path.join(dir, `block-${block.id}.${isModule(block) ? 'mjs' : 'cjs'}`)
  fs.writeFileSync(file, block.code)
  // An example's block may import a file beside it (its offline fake model): copy those in.
  const example = block.flags.find((f) => f.startsWith('example='))
  if (example !== undefined) {
    const folder = path.dirname(path.join(ROOT, example.slice('example='.length)))
    for (const [, rel] of block.code.matchAll(/from '(\.\/[^']+)'/g)) fs.copyFileSync(path.join(folder, rel), path.join(dir, rel))
  }
  const env = {
    ...process.env,
    HOME: dir,
    IDEMPOTENT_TOOLS_DB: path.join(dir, `store-${block.id}.db`),
    REDIS_URL: process.env.REDIS_URL || 'redis://127.0.0.1:6379/6',
    DATABASE_URL: process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/test',
  }
  const r = spawnSync(nodeBin, [file], { cwd: dir, env, encoding: 'utf8', timeout: TIMEOUT_MS })
  if (r.status === 0) return null
  const why = r.error ? r.error.message : `exit ${r.status ?? r.signal}`
  // The end of the output says what failed (node:test prints its summary last).
  return `${why}\n${`${r.stdout}\n${r.stderr}`.trim().split('\n').slice(-25).join('\n')}`
}

function typecheck(tsBlocks, dir) {
  if (tsBlocks.length === 0) return new Map()
  const files = tsBlocks.map((block) => {
    const file = `block-${block.id}.mts`
    fs.writeFileSync(path.join(dir, file), `${block.code}export {};\n`)
    return file
  })
  fs.writeFileSync(path.join(dir, 'tsconfig.json'), JSON.stringify({
    compilerOptions: {
      strict: true, noEmit: true, target: 'ES2022', module: 'nodenext', moduleResolution: 'nodenext',
      lib: ['ES2022', 'DOM'], types: ['node'], skipLibCheck: true,
    },
    files,
  }))
  const tsc = path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc')
  const r = spawnSync(process.execPath, [tsc, '-p', dir, '--pretty', 'false'], { cwd: dir, encoding: 'utf8' })
  const errors = new Map()
  for (const line of `${r.stdout}${r.stderr}`.split('\n')) {
    const m = /^block-(\d+)\.mts\((\d+),\d+\): (.*)$/.exec(line)
    if (m) {
      const block = tsBlocks.find((b) => b.id === Number(m[1]))
      errors.set(block.id, [...(errors.get(block.id) ?? []), `line ${block.line + Number(m[2])}: ${m[3]}`])
    } else if (line.trim() && r.status !== 0 && !/^\s/.test(line)) {
      errors.set(0, [...(errors.get(0) ?? []), line])
    }
  }
  if (r.status !== 0 && errors.size === 0) errors.set(0, [`tsc exited ${r.status}`])
  return errors
}

/** The block is the file its `example=` names, byte for byte. */
function exampleMismatch(block) {
  const flag = block.flags.find((f) => f.startsWith('example='))
  if (!flag) return null
  const file = path.join(ROOT, flag.slice('example='.length))
  if (!fs.existsSync(file)) return `${flag}: no such file`
  if (fs.readFileSync(file, 'utf8') !== block.code) {
    const a = fs.readFileSync(file, 'utf8').split('\n')
    const b = block.code.split('\n')
    const at = a.findIndex((l, i) => l !== b[i])
    return `differs from ${flag.slice('example='.length)} at its line ${at + 1}:\n  file:  ${a[at]}\n  block: ${b[at]}`
  }
  return null
}

/** README's `npm test` line is what .ci/run runs (under its `limit MINUTES` time bound or not). */
function testCommandMismatch(blocks) {
  const lines = blocks.filter((b) => SHOWN.has(b.lang)).flatMap((b) => b.code.split('\n'))
  const readme = lines.map((l) => l.replace(/#.*$/, '').trim()).find((l) => /^npm (run )?test\b/.test(l))
  if (!readme) return 'README.md shows no `npm test` command'
  const ci = fs.readFileSync(path.join(ROOT, '.ci', 'run'), 'utf8').split('\n').map((l) => l.trim())
  const escaped = readme.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
  if (!ci.some((l) => new RegExp(`^(limit \\d+ )?${escaped}(\\s*$|\\s+[|&;2>])`).test(l))) return `.ci/run does not run README.md's test command \`${readme}\``
  return null
}

/**
 * The README's engine table (section "Durable workflow engines") shows one line of code per
 * engine in its last column; each must be, verbatim, in a block of docs/frameworks.md that this
 * script type-checks against the real engine (e2e/engines/node_modules), so a line cannot drift.
 */
function engineLinesUnchecked() {
  const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8')
  const section = /^## Durable workflow engines\n([\s\S]*?)(?=^## )/m.exec(readme)
  if (!section) return ['README.md has no "## Durable workflow engines" section (its engine table is checked here)']
  const checked = blocks(fs.readFileSync(path.join(ROOT, 'docs', 'frameworks.md'), 'utf8'))
    .filter((b) => (TYPECHECK.has(b.lang) || RUN.has(b.lang)) && !b.flags.includes('norun'))
    .map((b) => b.code)
  const rows = section[1].split('\n').filter((l) => l.startsWith('| ') && !/^\| (engine|---)/.test(l))
  if (rows.length === 0) return ['README.md: the "Durable workflow engines" section has no table']
  const missing = []
  for (const row of rows) {
    const cells = row.split(' | ')
    for (const [, code] of cells[cells.length - 1].matchAll(/`([^`]+)`/g)) {
      if (!checked.some((c) => c.includes(code))) missing.push(`README.md: the engine table's line \`${code}\` (${cells[0].slice(2)}) is in no checked block of docs/frameworks.md`)
    }
  }
  return missing
}

function main() {
  const given = process.argv.slice(2)
  const files = given.length
    ? given.map((f) => path.resolve(f))
    : [path.join(ROOT, 'README.md'), ...fs.readdirSync(path.join(ROOT, 'docs')).filter((f) => f.endsWith('.md')).sort().map((f) => path.join(ROOT, 'docs', f))]
  let id = 0
  const all = files.flatMap((file) => blocks(fs.readFileSync(file, 'utf8')).map((b) => ({ ...b, id: ++id, file: path.relative(ROOT, file) })))
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'readme-check-'))
  const dir22 = path.join(dir, 'node22')
  fs.writeFileSync(path.join(dir, 'package.json'), '{ "name": "readme-check", "private": true }\n')
  linkModules(dir)
  const failures = []
  const counts = { ran: 0, typechecked: 0, shown: 0, skipped: 0 }
  const ts = []
  const where = (block) => `${block.file}:${block.line} (\`\`\`${block.lang})`
  try {
    if (files.some((f) => path.basename(f) === 'README.md')) {
      // A newcomer's page: what a user writes, at most 300 lines; harnesses live in examples/.
      const lines = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8').split('\n').length - 1
      if (lines > 300) failures.push(`README.md has ${lines} lines; keep it at most 300 (an offline harness belongs in examples/, a detail in docs/)`)
      const readme = all.filter((b) => b.file === 'README.md')
      const mismatch = testCommandMismatch(readme)
      if (mismatch) failures.push(mismatch)
      for (const missing of engineLinesUnchecked()) failures.push(missing)
    }
    for (const block of all) {
      const mismatch = exampleMismatch(block)
      if (mismatch) failures.push(`${where(block)} ${mismatch}`)
      if (block.flags.includes('norun') && (RUN.has(block.lang) || TYPECHECK.has(block.lang))) counts.skipped++
      else if (RUN.has(block.lang)) {
        let error
        if (block.flags.includes('node22')) {
          if (!fs.existsSync(E2E_MODULES)) error = 'needs e2e/node22/node_modules: run bash .ci/node22-e2e.sh first'
          else if (!node22Bin()) error = 'needs Node 22: bash .ci/nodes.sh could not install it'
          else {
            if (!fs.existsSync(dir22)) {
              fs.mkdirSync(dir22)
              fs.writeFileSync(path.join(dir22, 'package.json'), '{ "name": "readme-check-node22", "private": true }\n')
              linkModules(dir22, true)
            }
            error = runJs(block, dir22, node22Bin())
          }
        } else error = runJs(block, dir)
        counts.ran++
        if (error) failures.push(`${where(block)} failed: ${error}`)
        else console.log(`ok   ${where(block)} ran${block.flags.includes('node22') ? ' (Node 22)' : ''}`)
      } else if (TYPECHECK.has(block.lang)) ts.push(block)
      else if (SHOWN.has(block.lang)) counts.shown++
      else failures.push(`${where(block)}: no known info string; tag it (js/ts to check it, sh/text/json/... to show it only)`)
    }
    const tsErrors = typecheck(ts, dir)
    counts.typechecked = ts.length
    for (const block of ts) {
      if (tsErrors.has(block.id)) failures.push(`${where(block)} does not type-check:\n${tsErrors.get(block.id).join('\n')}`)
      else console.log(`ok   ${where(block)} type-checks`)
    }
    if (tsErrors.has(0)) failures.push(`tsc: ${tsErrors.get(0).join('\n')}`)
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
  for (const f of failures) console.log(`FAIL ${f}\n`)
  console.log(
    `readme: ${files.length} files, ${all.length} blocks: ${counts.ran} run, ${counts.typechecked} type-checked, ` +
      `${counts.shown} shown only, ${counts.skipped} marked norun; ${failures.length} failed`,
  )
  process.exit(failures.length ? 1 : 0)
}

main()
