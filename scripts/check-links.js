#!/usr/bin/env node
// Checks that every link of the documentation resolves, offline: .ci/run runs it.
//   node scripts/check-links.js [file.md ...]   (default: README.md, CHANGELOG.md, docs/*.md,
//                                                examples/**/README.md)
//
// What resolves:
//   - a relative link: the file (or folder) exists in the repository, and its #anchor is a
//     heading of that Markdown file;
//   - #anchor: a heading of the same file;
//   - https://github.com/idempotent-tools/idempotent-tools/blob/main/<path>[#anchor] and
//     /tree/main/<path>, https://raw.githubusercontent.com/idempotent-tools/idempotent-tools/main/<path>:
//     <path> is a file (a folder for tree/) of the repository, and the anchor a heading of it;
//   - https://github.com/idempotent-tools/idempotent-tools#<anchor>: a heading of README.md
//     (#readme is the README itself).
// "Of the repository" means tracked by git or new and not ignored (`git ls-files`), so a
// built file (dist/, pack/) never passes for a committed one.
// README.md must use absolute URLs only: it is also the package's page on the npm registry,
// where relative links break. Other addresses (other sites, the repository's issues and
// releases) cannot be checked offline; they are counted, not fetched.
'use strict'

const { execFileSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')

const ROOT = path.join(__dirname, '..')
const REPO = 'idempotent-tools/idempotent-tools'
const BLOB = new RegExp(`^https://github\\.com/${REPO}/(blob|tree)/main/([^#?]*)(?:#(.*))?$`)
const RAW = new RegExp(`^https://raw\\.githubusercontent\\.com/${REPO}/main/([^#?]*)$`)
const HOME = new RegExp(`^https://github\\.com/${REPO}/?(?:#(.*))?$`)
const ELSEWHERE_IN_REPO = new RegExp(`^https://github\\.com/${REPO}/(issues|pulls|releases|compare|actions)(/|$)`)

function repositoryFiles() {
  const out = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard', '-z'], { cwd: ROOT, encoding: 'utf8' })
  const files = new Set(out.split('\0').filter(Boolean).filter((f) => fs.existsSync(path.join(ROOT, f))))
  const dirs = new Set()
  for (const f of files) for (let d = path.posix.dirname(f); d !== '.'; d = path.posix.dirname(d)) dirs.add(d)
  return { files, dirs }
}

/** GitHub's heading ids: lower case, punctuation dropped, spaces to '-', repeats numbered. */
function anchorsOf(markdown) {
  const seen = new Map()
  const anchors = new Set()
  let fence = null
  for (const line of markdown.split('\n')) {
    const f = /^ {0,3}(`{3,}|~{3,})/.exec(line)
    if (f) {
      if (!fence) fence = f[1]
      else if (line.trim().startsWith(fence)) fence = null
      continue
    }
    if (fence) continue
    const h = /^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$/.exec(line)
    if (!h) continue
    const text = h[1]
      .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1') // links and images: their text
      .replace(/<[^>]+>/g, '') // inline HTML
      .replace(/`/g, '')
    const slug = text.toLowerCase().replace(/[^\p{L}\p{N}\p{M} _-]/gu, '').replace(/ /g, '-')
    const n = seen.get(slug) ?? 0
    seen.set(slug, n + 1)
    anchors.add(n === 0 ? slug : `${slug}-${n}`)
  }
  for (const m of markdown.matchAll(/<a\s+(?:name|id)="([^"]+)"/g)) anchors.add(m[1])
  return anchors
}

/** Every link target of a Markdown file, with its line, outside code blocks and code spans. */
function linksOf(markdown) {
  const links = []
  let fence = null
  markdown.split('\n').forEach((line, i) => {
    const f = /^ {0,3}(`{3,}|~{3,})/.exec(line)
    if (f) {
      if (!fence) fence = f[1]
      else if (line.trim().startsWith(fence)) fence = null
      return
    }
    if (fence) return
    const text = line.replace(/(`+)[^`]*?\1/g, '') // code spans
    for (const m of text.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) links.push({ line: i + 1, url: m[1] })
    for (const m of text.matchAll(/^\s*\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)/g)) links.push({ line: i + 1, url: m[1] })
    for (const m of text.matchAll(/<(?:a|img)\s[^>]*(?:href|src)="([^"]+)"/g)) links.push({ line: i + 1, url: m[1] })
  })
  return links
}

function main() {
  const repo = repositoryFiles()
  const given = process.argv.slice(2)
  const files = given.length
    ? given.map((f) => path.relative(ROOT, path.resolve(f)).split(path.sep).join('/'))
    : [...repo.files].filter((f) => /^(README|CHANGELOG)\.md$|^docs\/[^/]+\.md$|^examples\/.*README\.md$/.test(f)).sort()
  const anchorCache = new Map()
  const anchors = (file) => {
    if (!anchorCache.has(file)) anchorCache.set(file, anchorsOf(fs.readFileSync(path.join(ROOT, file), 'utf8')))
    return anchorCache.get(file)
  }
  const failures = []
  const counts = { checked: 0, external: 0 }

  /** A path of the repository (file or folder), and an anchor in it when it is Markdown. */
  function resolveInRepo(where, url, file, anchor, wantDir) {
    const clean = decodeURIComponent(file).replace(/\/$/, '')
    const isFile = repo.files.has(clean)
    const isDir = clean === '' || repo.dirs.has(clean)
    if (wantDir === true && !isDir) return failures.push(`${where}: ${url}: no folder ${clean} in the repository`)
    if (wantDir === false && !isFile) return failures.push(`${where}: ${url}: no file ${clean} in the repository${isDir ? ' (a folder: link it as tree/main/...)' : ''}`)
    if (wantDir === undefined && !isFile && !isDir) return failures.push(`${where}: ${url}: no file or folder ${clean} in the repository`)
    if (anchor) {
      if (!isFile || !clean.endsWith('.md')) return failures.push(`${where}: ${url}: an anchor on something that is not a Markdown file`)
      if (!anchors(clean).has(anchor)) return failures.push(`${where}: ${url}: ${clean} has no heading #${anchor}`)
    }
    counts.checked++
  }

  for (const file of files) {
    const markdown = fs.readFileSync(path.join(ROOT, file), 'utf8')
    for (const { line, url } of linksOf(markdown)) {
      const where = `${file}:${line}`
      let m
      if ((m = BLOB.exec(url))) resolveInRepo(where, url, m[2], m[3], m[1] === 'tree')
      else if ((m = RAW.exec(url))) resolveInRepo(where, url, m[1], undefined, false)
      else if ((m = HOME.exec(url))) {
        if (m[1] && m[1] !== 'readme' && !anchors('README.md').has(m[1])) failures.push(`${where}: ${url}: README.md has no heading #${m[1]}`)
        else counts.checked++
      } else if (ELSEWHERE_IN_REPO.test(url) || /^(https?:|mailto:)/.test(url)) counts.external++
      else if (url.startsWith('#')) {
        if (!anchors(file).has(url.slice(1))) failures.push(`${where}: ${url}: no such heading in ${file}`)
        else counts.checked++
      } else if (file === 'README.md') {
        failures.push(`${where}: ${url}: a relative link in README.md breaks on the npm registry page; use https://github.com/${REPO}/blob/main/...`)
      } else {
        const [target, anchor] = url.split('#')
        const joined = path.posix.normalize(path.posix.join(path.posix.dirname(file), target))
        resolveInRepo(where, url, joined, anchor, undefined)
      }
    }
  }
  for (const f of failures) console.log(`FAIL ${f}`)
  console.log(`links: ${files.length} files, ${counts.checked} links resolved, ${counts.external} to other sites (not fetched); ${failures.length} broken`)
  process.exit(failures.length ? 1 : 0)
}

main()
