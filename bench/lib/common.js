'use strict';
/** What every scenario shares: the package under test, the tool being wrapped, temp files. */

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const ROOT = path.resolve(__dirname, '..', '..');
const pkg = () => require(ROOT); // the built package (dist/), as users require it

/**
 * The tool: an agent tool call with a small JSON result. Its side effect is a no-op, but
 * like a real tool (an HTTP call, a query) it awaits I/O: one turn of the event loop
 * (`setImmediate`). A tool that resolved in the same tick let every settle of a burst
 * join the claims' batch, which no real tool does: the Redis numbers here were 1.6x
 * those measured from outside with an awaiting tool (issue 30).
 */
async function charge(args) {
  await new Promise((resolve) => setImmediate(resolve));
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
