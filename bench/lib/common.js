'use strict';
/** What every scenario shares: the package under test, the tool being wrapped, temp files. */

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const ROOT = path.resolve(__dirname, '..', '..');
const pkg = () => require(ROOT); // the built package (dist/), as users require it

/** The tool: an agent tool call with a small JSON result; the side effect itself is a no-op. */
async function charge(args) {
  return { ok: true, id: `ch_${args.n}`, amount: args.amount };
}

let seq = 0;
/** Arguments of a tool call; every call to `freshArgs` is a call never seen before. */
function freshArgs(tag) {
  seq += 1;
  return { customer: `cus_${tag}`, amount: 1000 + (seq % 997), currency: 'eur', n: seq, memo: 'benchmark' };
}

function tempDir(label) {
  return fs.mkdtempSync(path.join(os.tmpdir(), `idt-bench-${label}-`));
}

function rmrf(dir) {
  fs.rmSync(dir, { recursive: true, force: true });
}

module.exports = { ROOT, pkg, charge, freshArgs, tempDir, rmrf };
