#!/usr/bin/env node
// Builds the native addon for this machine into native/ with napi-rs.
//
//   node scripts/build-native.js [--release] [--require-glibc-2.17]
//
// On Linux with glibc, the binary we ship must load on glibc 2.17 (Amazon Linux 2,
// RHEL/CentOS 7, Ubuntu 18.04). Linking against this machine's newer glibc would pull in
// newer symbol versions, so the build goes through cargo-zigbuild, whose zig linker targets
// glibc 2.17 (`<triple>.2.17`). Without zig the build falls back to a plain cargo build
// (fine for working on the library), unless --require-glibc-2.17 (pack:local) says the
// binary is for shipping.
'use strict'

const { execFileSync, spawnSync } = require('node:child_process')
const { join } = require('node:path')
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

function build({ release = false, requireGlibc217 = false } = {}) {
  const { id, triple } = hostTarget()
  const args = ['napi', 'build', '--platform', '--output-dir', 'native']
  if (release) args.push('--release')
  if (id.endsWith('-gnu') && id.startsWith('linux-')) {
    if (haveZig()) {
      args.push('--target', `${triple}.2.17`, '--cross-compile')
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
  execFileSync('npx', args, { cwd: root, stdio: 'inherit', shell: process.platform === 'win32' })
  return { id, triple, file: join(root, 'native', `${napi.binaryName}.${id}.node`) }
}

module.exports = { build, hostTarget, idOfTriple }

if (require.main === module) {
  const flags = new Set(process.argv.slice(2))
  try {
    build({ release: flags.has('--release'), requireGlibc217: flags.has('--require-glibc-2.17') })
  } catch (error) {
    console.error(`build-native: ${error.message}`)
    process.exit(1)
  }
}
