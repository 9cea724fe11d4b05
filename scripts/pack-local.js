#!/usr/bin/env node
// npm run pack:local: builds this machine's platform binary in release mode (on Linux glibc,
// linked against glibc 2.17 through cargo-zigbuild) and the TypeScript layer, then writes
// into pack/ the two tarballs a user's `npm install idempotent-tools` downloads here:
//   pack/idempotent-tools-<version>.tgz             the main package
//   pack/idempotent-tools-<platform>-<version>.tgz  this platform's binary
// The main package lists every platform package in optionalDependencies at its exact version.
//
//   node scripts/pack-local.js [--no-build] [--all-platforms]
//
// The main package is packed from a staged copy whose package.json has no scripts and no
// devDependencies: the clone's `prepare` builds from source, and a published package must
// never run it (a user's install never compiles). The release workflow publishes these
// very tarballs (--no-build --all-platforms, after the CI artifacts are copied into npm/).
'use strict'

const { execFileSync } = require('node:child_process')
const fs = require('node:fs')
const { join } = require('node:path')
const { build, hostTarget } = require('./build-native.js')

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

function main() {
  checkVersions()
  const { id } = hostTarget()
  if (!flags.has('--no-build')) {
    build({ release: true, requireGlibc217: true })
    // The build just made is this platform's shipped binary: drop any older copy in npm/.
    fs.rmSync(join(root, 'npm', id, `${pkg.napi.binaryName}.${id}.node`), { force: true })
    execFileSync('npm', ['run', 'build:ts'], { cwd: root, stdio: 'inherit', shell: process.platform === 'win32' })
  }
  fs.rmSync(out, { recursive: true, force: true })
  fs.mkdirSync(out, { recursive: true })
  npmPack(stageMain())
  const ids = flags.has('--all-platforms') ? fs.readdirSync(join(root, 'npm')) : [id]
  for (const platform of ids) npmPack(stagePlatform(platform))
  fs.rmSync(join(out, 'stage'), { recursive: true, force: true })
}

try {
  main()
} catch (error) {
  console.error(`pack:local: ${error.message}`)
  process.exit(1)
}
