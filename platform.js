'use strict'
// Which napi-rs platform this process runs on. Shared by the loader (binding.js) and by
// scripts/ that build and pack this platform's binary.

const { readFileSync } = require('node:fs')

/** True on musl-based Linux (Alpine), where glibc binaries do not load. */
function isMusl() {
  try {
    return readFileSync('/usr/bin/ldd', 'utf8').includes('musl')
  } catch {
    // No ldd (distroless images): Node's own report says which libc it runs on.
    const header = process.report?.getReport?.()?.header
    return !header?.glibcVersionRuntime
  }
}

/** The napi-rs platform name: linux-x64-gnu, linux-arm64-musl, darwin-arm64, win32-x64-msvc... */
function platformId(platform = process.platform, arch = process.arch) {
  if (platform === 'linux') return `linux-${arch}-${isMusl() ? 'musl' : 'gnu'}`
  if (platform === 'win32') return `win32-${arch}-msvc`
  return `${platform}-${arch}`
}

/** The napi-rs platform name of a Rust target triple (x86_64-unknown-linux-gnu -> linux-x64-gnu). */
function idOfTriple(triple) {
  const [cpu, , os, abi] = triple.split('-')
  const arch = { x86_64: 'x64', aarch64: 'arm64' }[cpu] ?? cpu
  if (os === 'darwin') return `darwin-${arch}`
  if (os === 'windows') return `win32-${arch}-${abi}`
  return `${os}-${arch}-${abi}`
}

module.exports = { idOfTriple, isMusl, platformId }
