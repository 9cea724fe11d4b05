#!/usr/bin/env node
/**
 * The layout of lib/ kept true (lib/README.md, "may import"): fails when a folder imports
 * what the table forbids, or when any files of lib/ import each other in a circle (type
 * imports count: a circle of types is a circle of design, and the next value import
 * makes it a load-order bug). Reads the sources as text; needs no build.
 *
 *   node scripts/check-imports.js          # prints what it found; exit 1 on a violation
 */

'use strict';

const { readFileSync, readdirSync, statSync, existsSync } = require('node:fs');
const { dirname, join, relative, resolve, sep } = require('node:path');

const ROOT = resolve(__dirname, '..');
const LIB = join(ROOT, 'lib');

/**
 * What each folder may import, as lib/README.md's table says (a path relative to lib/:
 * a folder ends with '/'). The entry points at lib/ itself may import anything of lib/.
 */
const RULES = {
  'core/': { may: ['core/'], why: 'core/ (the call protocol) imports only core/ and the native addon' },
  'stores/': { may: ['core/', 'stores/'], why: 'stores/ imports only core/ (and stores/)' },
  'integrations/': {
    may: ['core/', 'integrations/', 'stores/default-store.ts'],
    why: 'integrations/ imports only core/, integrations/ and stores/default-store.ts (which registers the environment\'s default store)',
  },
  'apps/': { may: ['apps/'], why: 'apps/ imports the library only through apps/library.ts' },
};
/** The applications' one door into the library: it may import the library's public parts. */
const DOORS = { 'apps/library.ts': ['', 'core/', 'stores/default-store.ts', 'integrations/'] };
/** Files outside lib/ that a file may import (the compiled addon's loader). */
const OUTSIDE = { 'core/native.ts': ['binding.js'] };

function sources(dir) {
  const out = [];
  for (const entry of readdirSync(dir)) {
    const path = join(dir, entry);
    if (statSync(path).isDirectory()) out.push(...sources(path));
    else if (entry.endsWith('.ts') && !entry.endsWith('.d.ts')) out.push(path);
  }
  return out;
}

/** The module specifiers a TypeScript source names: imports, re-exports, requires, import() types. */
function specifiers(text) {
  // Comments out first (a doc comment's example `import` is not an import).
  const code = text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/^\s*\/\/.*$/gm, '');
  const found = new Set();
  const patterns = [
    /^\s*(?:import|export)\s[^;]*?\sfrom\s*['"]([^'"]+)['"]/gm, // import ... from '...'; export ... from '...'
    /^\s*import\s*['"]([^'"]+)['"]/gm, // import '...' (for its effect)
    /\brequire\(\s*['"]([^'"]+)['"]\s*\)/g, // import x = require('...'), require('...')
    /\bimport\(\s*['"]([^'"]+)['"]\s*\)/g, // import('...') (a type, or a dynamic import)
  ];
  for (const pattern of patterns) for (const m of code.matchAll(pattern)) found.add(m[1]);
  return [...found];
}

/** A relative specifier as a path relative to lib/ (the .ts source for a '.js' one); undefined for a package. */
function resolveSpecifier(from, spec) {
  if (!spec.startsWith('.')) return undefined;
  const target = resolve(dirname(from), spec);
  const candidates = spec.endsWith('.js') ? [target.replace(/\.js$/, '.ts'), target] : [`${target}.ts`, join(target, 'index.ts'), target];
  const hit = candidates.find((c) => existsSync(c)) ?? candidates[0];
  return relative(LIB, hit).split(sep).join('/');
}

const folderOf = (file) => (file.includes('/') ? `${file.slice(0, file.indexOf('/'))}/` : '');
const allowedBy = (allowed, target) => allowed.some((a) => (a.endsWith('/') || a === '' ? (a === '' ? !target.includes('/') && !target.startsWith('..') : target.startsWith(a)) : target === a));

function check() {
  const files = sources(LIB).map((f) => relative(LIB, f).split(sep).join('/')).sort();
  const graph = new Map();
  const problems = [];
  for (const file of files) {
    const edges = [];
    for (const spec of specifiers(readFileSync(join(LIB, file), 'utf8'))) {
      const target = resolveSpecifier(join(LIB, file), spec);
      if (target === undefined) continue; // a package (node:*, a framework, read lazily)
      if (target.startsWith('../')) {
        const outside = target.slice(3);
        if (!(OUTSIDE[file] ?? []).includes(outside)) problems.push(`${file} imports ${outside}, outside lib/`);
        continue;
      }
      edges.push(target);
      const folder = folderOf(file);
      const allowed = DOORS[file] ?? RULES[folder]?.may;
      if (allowed !== undefined && !allowedBy(allowed, target)) {
        problems.push(`lib/${file} imports lib/${target}: ${DOORS[file] ? `${file} may import only ${allowed.map((a) => a || 'the entry points').join(', ')}` : RULES[folder].why} (lib/README.md)`);
      }
    }
    graph.set(file, edges);
  }
  for (const cycle of circles(graph)) problems.push(`an import circle: ${[...cycle, cycle[0]].map((f) => `lib/${f}`).join(' -> ')}`);
  return { files, problems };
}

/** Every set of files that import each other in a circle (Tarjan's strongly connected components), each as one circle through them. */
function circles(graph) {
  let index = 0;
  const stack = [];
  const on = new Set();
  const idx = new Map();
  const low = new Map();
  const found = [];
  const visit = (v) => {
    idx.set(v, index);
    low.set(v, index++);
    stack.push(v);
    on.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!graph.has(w)) continue;
      if (!idx.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v), low.get(w)));
      } else if (on.has(w)) low.set(v, Math.min(low.get(v), idx.get(w)));
    }
    if (low.get(v) !== idx.get(v)) return;
    const component = [];
    let w;
    do {
      w = stack.pop();
      on.delete(w);
      component.push(w);
    } while (w !== v);
    const selfLoop = (graph.get(v) ?? []).includes(v);
    if (component.length > 1 || selfLoop) found.push(pathThrough(graph, new Set(component), v));
  };
  for (const v of graph.keys()) if (!idx.has(v)) visit(v);
  return found;
}

/** One circle inside a strongly connected component, from `start` back to it (breadth first). */
function pathThrough(graph, component, start) {
  const previous = new Map([[start, null]]);
  const queue = [start];
  while (queue.length > 0) {
    const v = queue.shift();
    for (const w of graph.get(v) ?? []) {
      if (!component.has(w)) continue;
      if (w === start) {
        const path = [];
        for (let at = v; at !== null; at = previous.get(at)) path.unshift(at);
        return path;
      }
      if (!previous.has(w)) {
        previous.set(w, v);
        queue.push(w);
      }
    }
  }
  return [start];
}

if (require.main === module) {
  const { files, problems } = check();
  for (const p of problems) console.error(`check-imports: ${p}`);
  if (problems.length > 0) {
    console.error(`check-imports: ${problems.length} problem(s) in ${files.length} files of lib/`);
    process.exit(1);
  }
  console.log(`check-imports: ${files.length} files of lib/, no import circle, every folder imports what lib/README.md allows`);
}

module.exports = { check, specifiers, circles };
