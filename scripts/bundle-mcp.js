#!/usr/bin/env node
// Bundles the MCP proxy (`idempotent-tools mcp`, lib/apps/mcp/) with the parts of
// @modelcontextprotocol/sdk it uses into one file, dist/apps/mcp/cli.js, so that the SDK is not a
// dependency of the package. Run by `npm run build:ts`, after tsc (which type-checks lib/apps/mcp and
// whose dist/apps/mcp output this replaces). The bundle starts from the TypeScript source so that
// esbuild reads the SDK's and zod's ES modules, which it can tree-shake (from their CommonJS
// builds the bundle was 1.1 MB; from the ES modules, 0.3 MB).
//
// Why a bundle: the proxy is one subcommand, and the SDK it needs (with zod, express, ajv and
// the rest of its tree) was about 100 packages and 38 MB in every user's node_modules, used by
// none of the users who never run the proxy. An optional peer dependency would have broken
// `npx idempotent-tools mcp -- <server>` (npx installs no optional peers), and a second package
// would have needed a second name in every client config. The bundle keeps both working.
//
// What stays outside the bundle: everything of this package that the proxy imports from outside
// dist/apps/mcp/ (the public API in dist/index.js, the terminal escaping), required at run time from
// the same files the library uses, so the proxy and the library share one module instance (one
// default store, one name registry). Node's built-in modules, of course.
//
// The licences of the bundled packages (all MIT or ISC, checked below) are written next to it,
// in dist/apps/mcp/THIRD_PARTY_LICENSES.txt.
'use strict'

const fs = require('node:fs')
const path = require('node:path')
const esbuild = require('esbuild')

const ROOT = path.join(__dirname, '..')
const SOURCE = path.join(ROOT, 'lib', 'apps', 'mcp')
const MCP = path.join(ROOT, 'dist', 'apps', 'mcp')
const ENTRY = path.join(MCP, 'cli.js')
const LICENSES = new Set(['MIT', 'ISC', 'BSD-2-Clause', 'BSD-3-Clause', 'Apache-2.0', '0BSD'])

/**
 * Imports of files of this package outside lib/apps/mcp/ stay requires of their compiled files: the
 * same relative path from dist/apps/mcp/ (lib/index.ts is dist/index.js).
 */
const keepPackageFilesOutside = {
  name: 'keep-package-files-outside',
  setup(build) {
    build.onResolve({ filter: /^\.\.?\// }, (args) => {
      const target = path.resolve(args.resolveDir, args.path)
      if (target.startsWith(SOURCE + path.sep) || target.includes(`${path.sep}node_modules${path.sep}`)) return undefined
      return { path: path.relative(SOURCE, target).replace(/\.ts$/, '.js').split(path.sep).join('/').replace(/^(?!\.)/, './'), external: true }
    })
  },
}

/** The package that holds `file` (the nearest package.json with a name). */
function owner(file) {
  for (let dir = path.dirname(file); dir !== path.dirname(dir); dir = path.dirname(dir)) {
    const pj = path.join(dir, 'package.json')
    if (fs.existsSync(pj)) {
      const p = JSON.parse(fs.readFileSync(pj, 'utf8'))
      if (p.name) return { dir, name: p.name, version: p.version, license: p.license }
    }
  }
  throw new Error(`no package.json above ${file}`)
}

function licenceText(dir) {
  const file = fs.readdirSync(dir).find((f) => /^(licen[sc]e|copying)(\.|$)/i.test(f))
  return file ? fs.readFileSync(path.join(dir, file), 'utf8').trim() : null
}

async function main() {
  if (!fs.existsSync(ENTRY)) throw new Error(`${path.relative(ROOT, ENTRY)} is missing: run tsc first`)
  const result = await esbuild.build({
    entryPoints: [path.join(SOURCE, 'cli.ts')],
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: 'node20',
    write: false,
    metafile: true,
    minifySyntax: true,
    minifyWhitespace: true,
    legalComments: 'none', // the licences go, whole, into THIRD_PARTY_LICENSES.txt
    outfile: ENTRY,
    plugins: [keepPackageFilesOutside],
    logLevel: 'warning',
  })
  const bundled = new Map()
  const [output] = Object.values(result.metafile.outputs)
  for (const [input, { bytesInOutput }] of Object.entries(output.inputs)) {
    if (bytesInOutput === 0) continue // read, but nothing of it is in the bundle
    const file = path.resolve(ROOT, input)
    if (!file.includes(`${path.sep}node_modules${path.sep}`)) continue
    const pkg = owner(file)
    bundled.set(pkg.name, pkg)
  }
  const notices = []
  for (const pkg of [...bundled.values()].sort((a, b) => a.name.localeCompare(b.name))) {
    if (!LICENSES.has(pkg.license)) throw new Error(`${pkg.name}@${pkg.version} is under ${pkg.license}: check it may be bundled`)
    const text = licenceText(pkg.dir)
    if (!text) throw new Error(`${pkg.name}@${pkg.version} ships no licence file to copy`)
    notices.push(`${pkg.name}@${pkg.version} (${pkg.license})\n\n${text}`)
  }
  // The tsc output of dist/apps/mcp is now inside the bundle: remove it, so that dist/ is what ships.
  for (const f of fs.readdirSync(MCP)) fs.rmSync(path.join(MCP, f), { recursive: true, force: true })
  const [out] = result.outputFiles
  const header = '// idempotent-tools mcp, bundled with the parts of @modelcontextprotocol/sdk it uses (scripts/bundle-mcp.js).\n' +
    '// Licences of the bundled packages: THIRD_PARTY_LICENSES.txt beside this file.\n'
  fs.writeFileSync(ENTRY, header + out.text)
  fs.writeFileSync(
    path.join(MCP, 'THIRD_PARTY_LICENSES.txt'),
    `dist/apps/mcp/cli.js bundles these packages (scripts/bundle-mcp.js):\n\n${notices.join(`\n\n${'-'.repeat(72)}\n\n`)}\n`,
  )
  console.log(`bundle-mcp: dist/apps/mcp/cli.js, ${(out.contents.length / 1024).toFixed(0)} kB, ${bundled.size} packages: ${[...bundled.keys()].join(', ')}`)
}

main().catch((error) => {
  console.error(`bundle-mcp: ${error.message}`)
  process.exit(1)
})
