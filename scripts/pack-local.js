#!/usr/bin/env node
// npm run pack:local: builds this machine's platform binary in release mode (on Linux glibc,
// linked against glibc 2.17 through cargo-zigbuild) and the TypeScript layer, then writes
// into pack/ the two tarballs a user's `npm install idempotent-tools` downloads here:
//   pack/idempotent-tools-<version>.tgz             the main package
//   pack/idempotent-tools-<platform>-<version>.tgz  this platform's binary
// The main package lists every platform package in optionalDependencies at its exact version.
//
//   node scripts/pack-local.js [--no-build] [--all-platforms] [--portable]
//   node scripts/pack-local.js --compare-sizes   (.ci/pack.sh: docs/installing.md's table against pack/sizes.md)
//   node scripts/pack-local.js --write-sizes     (copies pack/sizes.md into docs/installing.md: commit it)
//
// Build once: the release binary that `npm install` (prepare) built is reused when it was
// built from these sources (build-native.js's stamp); otherwise it is built. On Linux glibc
// the published binary links against glibc 2.17 (cargo-zigbuild and zig): with them, or with
// --portable (which fails without them), the pack is that; without them, it packs this
// machine's build, which loads on this glibc and newer, and says so (issue 37, item 3: it
// used to fail, then build the core a second time, about 9.5 minutes on 2 cores).
// The work tree is left as it was: the sizes it measured go to pack/sizes.md and the
// terminal, never into a tracked file (a README rewritten after packing showed up as a
// change in git, and the tarball had packed the previous table). The table in
// docs/installing.md (between the `pack:local sizes` markers; not part of the package) is
// measured, never written by hand: .ci/pack.sh fails when it is more than 10% off, and
// --write-sizes copies the measured one in.
//
// The main package is packed from a staged copy whose package.json has no scripts and no
// devDependencies: the clone's `prepare` builds from source, and a published package must
// never run it (a user's install never compiles). The release workflow publishes these
// very tarballs (--no-build --all-platforms, after the CI artifacts are copied into npm/).
'use strict'

const { execFileSync } = require('node:child_process')
const fs = require('node:fs')
const { join } = require('node:path')
const { build, fresh, haveZig, hostTarget } = require('./build-native.js')

const root = join(__dirname, '..')
const out = join(root, 'pack')
const pkg = JSON.parse(fs.readFileSync(join(root, 'package.json'), 'utf8'))
const flags = new Set(process.argv.slice(2))

function npmPack(dir) {
  const json = execFileSync('npm', ['pack', '--json', '--ignore-scripts', '--pack-destination', out], {
    cwd: dir,
    encoding: 'utf8',
    shell: process.platform === 'win32',
  })
  const [info] = JSON.parse(json)
  console.log(
    `${info.filename}: ${(info.size / 1024).toFixed(0)} kB packed, ` +
      `${(info.unpackedSize / 1024).toFixed(0)} kB unpacked, ${info.entryCount} files`,
  )
  return info
}

/** Every platform package is released at the main package's version. */
function checkVersions() {
  for (const id of fs.readdirSync(join(root, 'npm'))) {
    const platform = JSON.parse(fs.readFileSync(join(root, 'npm', id, 'package.json'), 'utf8'))
    if (platform.version !== pkg.version) {
      throw new Error(
        `${platform.name} is at ${platform.version}, but ${pkg.name} is at ${pkg.version}: ` +
          'run npx napi version (it syncs npm/*/package.json)',
      )
    }
  }
}

/**
 * The platform packages, each at exactly this version. Added here rather than committed:
 * they exist on the registry only once released, and npm ci refuses a lockfile without them.
 * (napi prepublish writes the same list into package.json during a release.)
 */
function optionalDependencies() {
  return Object.fromEntries(
    fs.readdirSync(join(root, 'npm')).sort().map((id) => [`${pkg.name}-${id}`, pkg.version]),
  )
}

function stageMain() {
  const stage = join(out, 'stage', pkg.name)
  fs.rmSync(stage, { recursive: true, force: true })
  fs.mkdirSync(stage, { recursive: true })
  for (const entry of pkg.files) {
    const from = join(root, entry)
    if (!fs.existsSync(from)) throw new Error(`${entry} (listed in package.json files) is missing: build first`)
    fs.cpSync(from, join(stage, entry), { recursive: true })
  }
  const published = { ...pkg, optionalDependencies: optionalDependencies() }
  delete published.scripts
  delete published.devDependencies
  fs.writeFileSync(join(stage, 'package.json'), `${JSON.stringify(published, null, 2)}\n`)
  return stage
}

function stagePlatform(id) {
  const file = `${pkg.napi.binaryName}.${id}.node`
  const dir = join(root, 'npm', id)
  const built = join(root, 'native', file)
  if (!fs.existsSync(join(dir, file))) {
    if (!fs.existsSync(built)) throw new Error(`${file} is neither in npm/${id}/ nor in native/`)
    fs.copyFileSync(built, join(dir, file))
  }
  return dir
}

const SIZES_START = '<!-- pack:local sizes (measured by npm run pack:local; write with node scripts/pack-local.js --write-sizes) -->'
const SIZES_END = '<!-- /pack:local sizes -->'
/** Where the committed table lives (not part of the package), and where pack:local writes the measured one. */
const SIZES_DOC = join(root, 'docs', 'installing.md')
const SIZES_MEASURED = join(out, 'sizes.md')
const kB = (bytes) => (bytes < 1000 * 1024 ? `${Math.round(bytes / 1024)} kB` : `${(bytes / 1024 / 1024).toFixed(1)} MB`)
const bytesOf = (text) => {
  const [n, unit] = text.trim().split(' ')
  return Number(n) * (unit === 'MB' ? 1024 * 1024 : 1024)
}

/** The size table of these packs, as markdown. */
function sizeTable(main, platform, id) {
  const rows = [
    [`\`${main.name}\` (JavaScript, types, the bundled MCP proxy)`, main],
    [`\`${platform.name}\` (the native core)`, platform],
  ]
  return [
    `| ${pkg.version}, measured on ${id} | download (packed) | installed (unpacked) |`,
    '| --- | --- | --- |',
    ...rows.map(([what, info]) => `| ${what} | ${kB(info.size)} | ${kB(info.unpackedSize)} |`),
  ].join('\n')
}

function tableIn(file) {
  const text = fs.readFileSync(file, 'utf8')
  const start = text.indexOf(SIZES_START)
  const end = text.indexOf(SIZES_END)
  if (start < 0 || end < start) throw new Error(`${file} has no size table markers (${SIZES_START} ... ${SIZES_END})`)
  return { text, start: start + SIZES_START.length, end, table: text.slice(start + SIZES_START.length, end).trim() }
}

function measuredTable() {
  if (!fs.existsSync(SIZES_MEASURED)) throw new Error(`${SIZES_MEASURED} is missing: run npm run pack:local first`)
  return fs.readFileSync(SIZES_MEASURED, 'utf8').trim()
}

/** --write-sizes: the measured table into docs/installing.md. */
function writeSizes() {
  const table = measuredTable()
  const { text, start, end } = tableIn(SIZES_DOC)
  fs.writeFileSync(SIZES_DOC, `${text.slice(0, start)}\n${table}\n${text.slice(end)}`)
  console.log(`docs/installing.md size table (written; commit it):\n${table}`)
}

/** --compare-sizes: exits non-zero when a number of the committed table is more than 10% off the measured one's. */
function compareSizes() {
  const numbers = (t) => [...t.matchAll(/\| ([\d.]+ (?:kB|MB)) /g)].map((m) => bytesOf(m[1]))
  const committed = tableIn(SIZES_DOC).table
  const measured = measuredTable()
  const [was, now] = [numbers(committed), numbers(measured)]
  if (now.length === 0 || was.length !== now.length || was.some((b, i) => Math.abs(b - now[i]) > now[i] * 0.1)) {
    throw new Error(
      `the size table committed in docs/installing.md is more than 10% off what pack:local measured:\n${committed}\nmeasured:\n${measured}\n` +
        '(node scripts/pack-local.js --write-sizes writes the measured one there: commit it)',
    )
  }
  console.log('docs/installing.md size table: within 10% of what was measured')
}

/** The newest (`pick` Math.max) or oldest (Math.min) mtime of the files under `dir` that `keep` takes. */
function mtimeUnder(dir, keep, pick) {
  let found = pick === Math.max ? -Infinity : Infinity
  for (const entry of fs.readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (!entry.isFile() || !keep(entry.name)) continue
    found = pick(found, fs.statSync(join(entry.parentPath ?? entry.path, entry.name)).mtimeMs)
  }
  return found
}

/**
 * Whether dist/ was built after the TypeScript sources last changed (as npm ci's prepare
 * leaves it): then it is packed as it is. Rebuilding it rewrote every file in dist/ in
 * place, and CI packs beside the tests, whose child processes load dist/: one loaded a
 * module while tsc was rewriting it ("resolveLimits is not a function", 2026-12-07).
 */
function tsFresh() {
  if (!fs.existsSync(join(root, 'dist', 'index.js'))) return false
  const sources = Math.max(
    mtimeUnder(join(root, 'lib'), (name) => name.endsWith('.ts'), Math.max),
    ...['tsconfig.json', 'package.json', join('scripts', 'bundle-mcp.js')].map((f) => fs.statSync(join(root, f)).mtimeMs),
  )
  return mtimeUnder(join(root, 'dist'), (name) => name.endsWith('.js'), Math.min) > sources
}

/** This machine's glibc version (for the message of a non-portable pack). */
function glibcVersion() {
  const report = process.report?.getReport?.()
  return report?.header?.glibcVersionRuntime ?? 'unknown'
}

function main() {
  checkVersions()
  const { id } = hostTarget()
  if (!flags.has('--no-build')) {
    // A portable Linux glibc pack (what publishing uploads) needs zig; without it, this machine's build.
    const portable = flags.has('--portable') || !id.startsWith('linux-') || !id.endsWith('-gnu') || haveZig()
    const built = fresh({ release: true, requireGlibc217: portable && id.endsWith('-gnu') && id.startsWith('linux-') })
    if (built) {
      console.log(`pack:local: reusing the release build of ${built.builtAt} in native/ (the Rust sources did not change since)`)
    } else {
      build({ release: true, requireGlibc217: portable && id.startsWith('linux-') && id.endsWith('-gnu') })
    }
    const stamp = fresh({ release: true })
    if (id.startsWith('linux-') && id.endsWith('-gnu') && !stamp?.glibc217) {
      console.log(
        `pack:local: this pack's binary links against this machine's glibc (${glibcVersion()}), so it loads here and on machines with that glibc or newer. ` +
          'The published binary loads on glibc 2.17 and newer: for that pack, install zig and cargo-zigbuild (pip install ziglang==0.17.0 cargo-zigbuild==0.24.0) and run npm run pack:local -- --portable.',
      )
    }
    // The build in native/ is this platform's shipped binary: drop any older copy in npm/.
    fs.rmSync(join(root, 'npm', id, `${pkg.napi.binaryName}.${id}.node`), { force: true })
    if (tsFresh()) console.log('pack:local: reusing the TypeScript build in dist/ (lib/ did not change since)')
    else execFileSync('npm', ['run', 'build:ts'], { cwd: root, stdio: 'inherit', shell: process.platform === 'win32' })
  }
  fs.rmSync(out, { recursive: true, force: true })
  fs.mkdirSync(out, { recursive: true })
  const mainInfo = npmPack(stageMain())
  const ids = flags.has('--all-platforms') ? fs.readdirSync(join(root, 'npm')) : [id]
  const infos = Object.fromEntries(ids.map((platform) => [platform, npmPack(stagePlatform(platform))]))
  fs.rmSync(join(out, 'stage'), { recursive: true, force: true })
  const table = sizeTable(mainInfo, infos[id], id)
  fs.writeFileSync(SIZES_MEASURED, `${table}\n`)
  console.log(`sizes (pack/sizes.md; docs/installing.md has the committed table):\n${table}`)
}

try {
  if (flags.has('--compare-sizes')) compareSizes()
  else if (flags.has('--write-sizes')) writeSizes()
  else main()
} catch (error) {
  console.error(`pack:local: ${error.message}`)
  process.exit(1)
}
