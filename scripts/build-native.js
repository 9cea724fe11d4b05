#!/usr/bin/env node
// Builds the native addon for this machine into native/ with napi-rs.
//
//   node scripts/build-native.js [--release] [--require-glibc-2.17]
//
// Each build leaves a stamp beside the binary (native/.build-stamp.json: a digest of the
// Rust sources, the build's mode, whether it targets glibc 2.17, the binary's own digest),
// so that `npm run pack:local` right after `npm install` reuses the release build the
// install made instead of building it again (minutes): `fresh()` says whether the binary
// in native/ is that build of these very sources. Any change to src/, Cargo.toml,
// Cargo.lock or build.rs, or another binary in native/ (`npm run build:debug` writes one
// without a stamp), makes it stale.
//
// On Linux with glibc, the binary we ship must load on glibc 2.17 (Amazon Linux 2,
// RHEL/CentOS 7, Ubuntu 18.04). Linking against this machine's newer glibc would pull in
// newer symbol versions, so the build goes through cargo-zigbuild, whose zig linker targets
// glibc 2.17 (`<triple>.2.17`). Without zig the build falls back to a plain cargo build
// (fine for working on the library), unless --require-glibc-2.17 (pack:local) says the
// binary is for shipping.
'use strict'

const { execFileSync, spawnSync } = require('node:child_process')
const { createHash } = require('node:crypto')
const fs = require('node:fs')
const { join, relative } = require('node:path')
const { idOfTriple, platformId } = require('../platform.js')

const root = join(__dirname, '..')
const { napi } = require('../package.json')

/** The triple we ship for this machine's platform, from package.json's napi.targets. */
function hostTarget(id = platformId()) {
  const triple = napi.targets.find((t) => idOfTriple(t) === id)
  if (!triple) {
    throw new Error(`no target in package.json napi.targets builds ${id}; targets: ${napi.targets.join(', ')}`)
  }
  return { id, triple }
}

function works(command, args) {
  return spawnSync(command, args, { stdio: 'ignore', shell: process.platform === 'win32' }).status === 0
}

/** cargo-zigbuild and a zig (on PATH, or the `ziglang` Python package it also finds). */
function haveZig() {
  if (!works('cargo', ['zigbuild', '--help'])) return false
  return works('zig', ['version']) || works('python3', ['-m', 'ziglang', 'version'])
}

const STAMP = join(root, 'native', '.build-stamp.json')

/** The files a build is made of: the Rust sources and what cargo and napi read. */
function inputFiles() {
  const files = ['Cargo.toml', 'Cargo.lock', 'build.rs', 'package.json'].map((f) => join(root, f))
  const walk = (dir) => {
    for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name)
      if (entry.isDirectory()) walk(path)
      else if (entry.isFile()) files.push(path)
    }
  }
  walk(join(root, 'src'))
  return files.filter((f) => fs.existsSync(f)).sort()
}

/** One digest of every input file's path and content (package.json: its napi settings only). */
function inputsDigest() {
  const hash = createHash('sha256')
  for (const file of inputFiles()) {
    const content = file === join(root, 'package.json') ? JSON.stringify(napi) : fs.readFileSync(file)
    hash.update(`${relative(root, file)}\0`).update(content).update('\0')
  }
  return hash.digest('hex')
}

const fileDigest = (file) => createHash('sha256').update(fs.readFileSync(file)).digest('hex')

/**
 * Whether native/ holds a build of these sources that `options` accepts: release when a
 * release is asked for, linked against glibc 2.17 when that is required. Returns the
 * stamp (when it was built) or null.
 */
function fresh({ release = false, requireGlibc217 = false } = {}) {
  let stamp
  try {
    stamp = JSON.parse(fs.readFileSync(STAMP, 'utf8'))
  } catch {
    return null
  }
  const { id } = hostTarget()
  const file = join(root, 'native', `${napi.binaryName}.${id}.node`)
  if (stamp.id !== id || (release && !stamp.release) || (requireGlibc217 && !stamp.glibc217)) return null
  if (!fs.existsSync(file) || fileDigest(file) !== stamp.binary || stamp.inputs !== inputsDigest()) return null
  return stamp
}

function build({ release = false, requireGlibc217 = false } = {}) {
  const { id, triple } = hostTarget()
  const args = ['napi', 'build', '--platform', '--output-dir', 'native']
  if (release) args.push('--release')
  let glibc217 = false
  if (id.endsWith('-gnu') && id.startsWith('linux-')) {
    if (haveZig()) {
      args.push('--target', `${triple}.2.17`, '--cross-compile')
      glibc217 = true
    } else if (requireGlibc217) {
      throw new Error(
        'building the shipped Linux glibc binary needs cargo-zigbuild and zig, to link against glibc 2.17:\n' +
          '  pip install ziglang==0.17.0 cargo-zigbuild==0.24.0',
      )
    } else {
      console.error('build-native: no cargo-zigbuild/zig, so this build links against this machine\'s glibc (fine for development)')
    }
  }
  console.error(`build-native: npx ${args.join(' ')}`)
  const inputs = inputsDigest() // before the build: an edit made while it runs makes the stamp stale
  fs.rmSync(STAMP, { force: true })
  execFileSync('npx', args, { cwd: root, stdio: 'inherit', shell: process.platform === 'win32' })
  const file = join(root, 'native', `${napi.binaryName}.${id}.node`)
  const stamp = { id, release, glibc217, inputs, binary: fileDigest(file), builtAt: new Date().toISOString() }
  fs.writeFileSync(STAMP, `${JSON.stringify(stamp, null, 2)}\n`)
  return { id, triple, file }
}

module.exports = { build, fresh, haveZig, hostTarget, idOfTriple }

if (require.main === module) {
  const flags = new Set(process.argv.slice(2))
  try {
    build({ release: flags.has('--release'), requireGlibc217: flags.has('--require-glibc-2.17') })
  } catch (error) {
    console.error(`build-native: ${error.message}`)
    process.exit(1)
  }
}
