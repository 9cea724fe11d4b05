'use strict'
// Loads the native half of idempotent-tools (the Rust addon built by napi-rs).
//
// Published installs get the addon from one optional dependency per platform,
// `idempotent-tools-<platform>` (npm installs only the one whose os/cpu/libc match). A clone
// builds it from source into ./native/. This file is written by hand rather than generated
// by `napi build` so that it covers exactly the platforms we ship and, when none fits, says
// which platform it looked for and how to build from source.

const { join } = require('node:path')

const { idOfTriple, platformId } = require('./platform.js')
const { name, version, napi, repository } = require('./package.json')
const BINARY = 'idempotent-tools'
/** The repository to clone, from package.json (git+https://host/owner/repo.git). */
const SOURCE = String(repository?.url ?? repository ?? '').replace(/^git\+/, '').replace(/\.git$/, '')

function describe(error) {
  return error && typeof error.message === 'string' ? error.message.split('\n')[0] : String(error)
}

function load() {
  const id = platformId()
  const pkg = `${name}-${id}`
  const tried = []
  let missing = false

  // An explicit path wins (the variable every napi-rs loader honours).
  const override = process.env.NAPI_RS_NATIVE_LIBRARY_PATH
  if (override) {
    try {
      return require(override)
    } catch (error) {
      tried.push(`NAPI_RS_NATIVE_LIBRARY_PATH=${override}: ${describe(error)}`)
    }
  }

  // A build from source in a clone (npm install / npm run build:debug put it there).
  const local = join(__dirname, 'native', `${BINARY}.${id}.node`)
  try {
    return require(local)
  } catch (error) {
    if (error.code !== 'MODULE_NOT_FOUND') tried.push(`${local}: ${describe(error)}`)
  }

  // The prebuilt binary of a published install.
  try {
    const found = require(`${pkg}/package.json`).version
    if (found !== version) {
      tried.push(
        `${pkg}@${found} is installed, but ${name}@${version} needs ${pkg}@${version}: ` +
          'reinstall (delete node_modules and the lockfile if they came from another version)',
      )
    } else {
      return require(pkg)
    }
  } catch (error) {
    missing = error.code === 'MODULE_NOT_FOUND' && String(error.message).includes(`${pkg}/package.json`)
    tried.push(missing ? `${pkg}: not installed` : `${pkg}: ${describe(error)}`)
  }

  const shipped = napi.targets.map(idOfTriple)
  const lines = [
    `${name}: no native binary loads for this platform, ${id} (Node ${process.version}).`,
    ...tried.map((line) => `  - ${line}`),
    `Prebuilt platforms: ${shipped.join(', ')}.`,
  ]
  if (missing && shipped.includes(id)) {
    lines.push(
      `${pkg} is published for this platform: npm skipped it. Reinstall without ` +
        '--omit=optional / --no-optional, and if the lockfile was made on another OS or CPU, ' +
        'delete it and node_modules first (npm/cli#4828).',
    )
  }
  lines.push(
    'To build from source instead (needs Rust, https://rustup.rs): ' +
      `git clone ${SOURCE} && cd ${BINARY} && npm install ` +
      '(it builds the addon into native/), then, in your project, npm install <path of that clone>.',
  )
  const error = new Error(lines.join('\n'))
  error.code = 'IDEMPOTENT_TOOLS_NO_BINARY'
  throw error
}

module.exports = load()
