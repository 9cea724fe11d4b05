#!/usr/bin/env node
// Checks every fenced code block of README.md, so that none can drift from the code.
// .ci/run runs it after the build: node scripts/check-readme.js [README.md]
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
//       this clone's node_modules, then e2e/node22/node_modules (Mastra, @openai/agents).
//   ```sh  ```bash  ```shell  ```console  ```text  ```json  ```jsonc  ```yaml  ```toml
//   ```sql  ```diff  ```ini
//       SHOWN ONLY, never run: commands, output, configuration, error messages.
//   a block with no info string, or another one: an error (say what the block is).
//   `norun` after the language (```js norun) skips one js/ts block; the prose around it
//       must say why. Use it for nothing that a user would paste and run.
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
function linkModules(dir) {
  const target = path.join(dir, 'node_modules')
  fs.mkdirSync(target)
  fs.symlinkSync(ROOT, path.join(target, 'idempotent-tools'), 'junction')
  for (const source of [path.join(ROOT, 'node_modules'), path.join(ROOT, 'e2e', 'node22', 'node_modules')]) {
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

function runJs(block, dir) {
  const file = path.join(dir, `block-${block.line}.${isModule(block) ? 'mjs' : 'cjs'}`)
  fs.writeFileSync(file, block.code)
  const env = {
    ...process.env,
    HOME: dir,
    IDEMPOTENT_TOOLS_DB: path.join(dir, `store-${block.line}.db`),
    REDIS_URL: process.env.REDIS_URL || 'redis://127.0.0.1:6379/6',
    DATABASE_URL: process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/test',
  }
  const r = spawnSync(process.execPath, [file], { cwd: dir, env, encoding: 'utf8', timeout: TIMEOUT_MS })
  if (r.status === 0) return null
  const why = r.error ? r.error.message : `exit ${r.status ?? r.signal}`
  // The end of the output says what failed (node:test prints its summary last).
  return `${why}\n${`${r.stdout}\n${r.stderr}`.trim().split('\n').slice(-25).join('\n')}`
}

function typecheck(tsBlocks, dir) {
  if (tsBlocks.length === 0) return new Map()
  const files = tsBlocks.map((block) => {
    const file = `block-${block.line}.mts`
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
      const at = Number(m[1])
      errors.set(at, [...(errors.get(at) ?? []), `line ${at + Number(m[2])}: ${m[3]}`])
    } else if (line.trim() && r.status !== 0 && !/^\s/.test(line)) {
      errors.set(0, [...(errors.get(0) ?? []), line])
    }
  }
  if (r.status !== 0 && errors.size === 0) errors.set(0, [`tsc exited ${r.status}`])
  return errors
}

function main() {
  const readme = path.resolve(process.argv[2] ?? path.join(ROOT, 'README.md'))
  const all = blocks(fs.readFileSync(readme, 'utf8'))
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'readme-check-'))
  fs.writeFileSync(path.join(dir, 'package.json'), '{ "name": "readme-check", "private": true }\n')
  linkModules(dir)
  const failures = []
  const counts = { ran: 0, typechecked: 0, shown: 0, skipped: 0 }
  const ts = []
  try {
    for (const block of all) {
      const where = `README.md:${block.line} (\`\`\`${block.lang})`
      if (block.flags.includes('norun') && (RUN.has(block.lang) || TYPECHECK.has(block.lang))) counts.skipped++
      else if (RUN.has(block.lang)) {
        const error = runJs(block, dir)
        counts.ran++
        if (error) failures.push(`${where} failed: ${error}`)
        else console.log(`ok   ${where} ran`)
      } else if (TYPECHECK.has(block.lang)) ts.push(block)
      else if (SHOWN.has(block.lang)) counts.shown++
      else failures.push(`${where}: no known info string; tag it (js/ts to check it, sh/text/json/... to show it only)`)
    }
    const tsErrors = typecheck(ts, dir)
    counts.typechecked = ts.length
    for (const block of ts) {
      const where = `README.md:${block.line} (\`\`\`${block.lang})`
      if (tsErrors.has(block.line)) failures.push(`${where} does not type-check:\n${tsErrors.get(block.line).join('\n')}`)
      else console.log(`ok   ${where} type-checks`)
    }
    if (tsErrors.has(0)) failures.push(`tsc: ${tsErrors.get(0).join('\n')}`)
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
  for (const f of failures) console.log(`FAIL ${f}\n`)
  console.log(
    `readme: ${all.length} blocks: ${counts.ran} run, ${counts.typechecked} type-checked, ` +
      `${counts.shown} shown only, ${counts.skipped} marked norun; ${failures.length} failed`,
  )
  process.exit(failures.length ? 1 : 0)
}

main()
